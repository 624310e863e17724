#!/usr/bin/env python3
"""Builds VM-like raw disk images for `vstack space`, reproducibly, from this machine's files.

Each image is an ext4 file system made with `mke2fs -d` from a staging tree:
  - an OS template shared by every VM: system files copied from this machine (shared libraries
    and programs, headers and documentation, the Python standard library), in a fixed order
    (sorted paths) up to a byte budget;
  - per-VM variants: a window of extra "packages" that overlaps the next VM's by half, some
    template files removed, and per-VM configuration files;
  - per-VM data: an OLTP-like SQLite database (4 KiB pages; inserts, then updates and deletes),
    application logs, and incompressible data;
  - a never-written remainder: the image is larger than its content and stays sparse.

Nothing is downloaded. On the same machine (same files, same e2fsprogs and SQLite), the same
preset gives byte-identical images: every choice comes from a seeded PRNG, file times and owners
are fixed, mke2fs gets a fixed UUID, hash seed and clock (E2FSPROGS_FAKE_TIME), and debugfs
then sets every inode's change time (which mke2fs copies from the staging files and the kernel
keeps current). Run it as root (file owners go into the image). Files are staged on tmpfs
(/dev/shm; $STAGING overrides), whose directory order is the order of creation. A manifest
(sizes, allocated bytes, SHA-256) is written next to the images.

  make_datasets.py OUTDIR [--preset tiny|small|docs] [--vms N] [--seed S]
"""

import argparse
import hashlib
import os
import random
import shutil
import sqlite3
import subprocess
import sys

PRESETS = {
    # 2 x 48 MiB: quick, for tests.
    "tiny": dict(vms=2, image=48 << 20, template=8 << 20, variant=2 << 20, db=3 << 20,
                 log=1 << 20, blob=1 << 20),
    # 4 x 128 MiB (the default): a few hundred MiB in all.
    "small": dict(vms=4, image=128 << 20, template=32 << 20, variant=6 << 20, db=12 << 20,
                  log=4 << 20, blob=4 << 20),
    # 4 x 2 GiB (four VMs, like the vSAN 6.2 SQL Server test): docs/space-savings.md.
    "docs": dict(vms=4, image=2 << 30, template=480 << 20, variant=64 << 20, db=160 << 20,
                 log=48 << 20, blob=64 << 20),
}

# Where the OS template comes from, in this order, with the share of the template budget each
# gets: binaries (compress moderately), text (compresses well), Python sources.
TEMPLATE_SOURCES = [
    ("/usr/lib/x86_64-linux-gnu", 0.40),
    ("/usr/bin", 0.20),
    ("/usr/include", 0.15),
    ("/usr/share/doc", 0.10),
    ("/usr/lib/python3.11", 0.15),
]
# The extra packages each VM picks a window of.
PACKAGE_SOURCES = ["/usr/share/locale", "/usr/lib/x86_64-linux-gnu/perl", "/usr/share/perl",
                   "/usr/lib/gcc", "/usr/libexec"]

FIXED_TIME = 1700000000  # 2023-11-14, for every file time and mke2fs's clock
MAX_FILE = 4 << 20


def candidates(root):
    """Regular, readable files under `root`, in sorted path order, with their sizes."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not os.path.isfile(path) or os.path.islink(path):
                continue
            if st.st_size == 0 or st.st_size > MAX_FILE or not os.access(path, os.R_OK):
                continue
            if '"' in path or "\n" in path:
                continue  # not expressible in a debugfs command file
            out.append((path, st.st_size))
    return out


def take(files, budget, start=0):
    """Files from position `start` on, up to `budget` bytes."""
    chosen, total = [], 0
    for path, size in files[start:]:
        if total + size > budget:
            continue
        chosen.append(path)
        total += size
        if total >= budget * 0.98:
            break
    return chosen


def copy_into(staging, paths):
    for src in paths:
        dst = os.path.join(staging, src.lstrip("/"))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src, dst)
        os.chmod(dst, os.stat(src).st_mode & 0o755)


class Fields:
    """Several small random numbers out of one 64-bit draw (random.randrange is slow)."""

    def __init__(self, rng):
        self.bits = rng.getrandbits(64)

    def below(self, n):
        v = self.bits % n
        self.bits //= n
        return v


def write_db(path, budget, rng):
    """An OLTP-like SQLite database: customers and orders, then churn."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA page_size = 4096")
    db.execute("PRAGMA journal_mode = DELETE")
    db.execute("PRAGMA synchronous = OFF")  # no fsyncs: the bytes are the same, the time is not
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT, "
               "balance INTEGER, city TEXT)")
    db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer INTEGER, item TEXT, "
               "qty INTEGER, price INTEGER, status TEXT, created INTEGER)")
    db.execute("CREATE INDEX orders_by_customer ON orders (customer)")
    cities = ["Lisbon", "Oslo", "Austin", "Pune", "Leeds", "Osaka", "Lyon", "Quito"]
    items = ["disk", "cable", "switch", "server", "rack", "license", "support", "nic"]
    statuses = ["new", "paid", "shipped", "returned"]
    customers, orders = 0, 0
    while os.path.getsize(path) < budget:
        rows = []
        for _ in range(500):
            customers += 1
            f = Fields(rng)
            rows.append((customers, "customer-%06d" % f.below(10**6),
                         "user%d@example.%s" % (f.below(10**5), ("com", "org")[f.below(2)]),
                         f.below(10**7), cities[f.below(8)]))
        db.executemany("INSERT INTO customers VALUES (?,?,?,?,?)", rows)
        rows = []
        for _ in range(2000):
            orders += 1
            f = Fields(rng)
            rows.append((orders, 1 + f.below(customers), items[f.below(8)], 1 + f.below(19),
                         100 + f.below(99900), statuses[f.below(4)], FIXED_TIME + orders * 7))
        db.executemany("INSERT INTO orders VALUES (?,?,?,?,?,?,?)", rows)
        db.commit()
    # Churn: updates and deletes leave partly filled and free pages, as a live OLTP database has.
    db.executemany("UPDATE orders SET status = ? WHERE id = ?",
                   [(statuses[rng.getrandbits(2)], 1 + rng.getrandbits(40) % orders)
                    for _ in range(orders // 10)])
    db.executemany("DELETE FROM orders WHERE id = ?",
                   [(1 + rng.getrandbits(40) % orders,) for _ in range(orders // 20)])
    db.commit()
    db.close()


def write_log(path, budget, rng, vm):
    levels = ["INFO", "INFO", "INFO", "WARN", "DEBUG", "ERROR"]
    paths = ["/api/v1/orders", "/api/v1/customers", "/health", "/api/v1/items", "/login"]
    methods = ["GET", "POST", "PUT"]
    codes = [200, 200, 200, 201, 404, 500]
    t = FIXED_TIME
    lines = []
    size = 0
    while size < budget:
        f = Fields(rng)
        t += 1 + f.below(900)
        line = "%d.%03d %s [%s-worker-%d] req=%08x %s %s/%d status=%d dur_ms=%d\n" % (
            t // 1000, t % 1000, levels[f.below(6)], vm, f.below(16), rng.getrandbits(32),
            methods[f.below(3)], paths[f.below(5)], f.below(10**5), codes[f.below(6)],
            1 + f.below(2000))
        lines.append(line)
        size += len(line)
    with open(path, "w") as out:
        out.write("".join(lines))


def fix_times_and_owners(staging):
    for dirpath, dirnames, filenames in os.walk(staging):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if os.geteuid() == 0:
                os.lchown(p, 0, 0)
            os.utime(p, (FIXED_TIME, FIXED_TIME), follow_symlinks=False)
    os.utime(staging, (FIXED_TIME, FIXED_TIME))


def make_vm(out, staging_root, i, preset, template, packages, seed):
    vm = "vm%02d" % i
    rng = random.Random(seed * 1000 + i)
    staging = os.path.join(staging_root, vm)
    if os.path.exists(staging):
        shutil.rmtree(staging)
    os.makedirs(staging)
    # The template, minus a few files this VM does not have.
    copy_into(staging, [p for k, p in enumerate(template) if k % (17 + i) != 3])
    # Its window of packages; the next VM's window overlaps it by half.
    window = take(packages, preset["variant"], start=i * len(packages) // (2 * preset["vms"] + 2))
    copy_into(staging, window)
    etc = os.path.join(staging, "etc")
    os.makedirs(etc, exist_ok=True)
    with open(os.path.join(etc, "hostname"), "w") as f:
        f.write(vm + "\n")
    with open(os.path.join(etc, "machine-id"), "w") as f:
        f.write("%032x\n" % rng.getrandbits(128))
    with open(os.path.join(etc, "app.conf"), "w") as f:
        f.write("[server]\nname = %s\nworkers = %d\nport = %d\n" %
                (vm, rng.randrange(2, 64), 8000 + i))
    app = os.path.join(staging, "var/lib/app")
    os.makedirs(app)
    write_db(os.path.join(app, "oltp.db"), preset["db"], rng)
    os.makedirs(os.path.join(staging, "var/log/app"))
    write_log(os.path.join(staging, "var/log/app/app.log"), preset["log"], rng, vm)
    with open(os.path.join(app, "media.bin"), "wb") as f:
        f.write(rng.randbytes(preset["blob"]))
    fix_times_and_owners(staging)

    image = os.path.join(out, vm + ".img")
    if os.path.exists(image):
        os.unlink(image)
    with open(image, "wb") as f:
        f.truncate(preset["image"])  # sparse: the never-written remainder stays a hole
    uuid = "%08x-%04x-%04x-%04x-%012x" % (rng.getrandbits(32), rng.getrandbits(16),
                                          rng.getrandbits(16), rng.getrandbits(16),
                                          rng.getrandbits(48))
    env = dict(os.environ, E2FSPROGS_FAKE_TIME=str(FIXED_TIME))
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-L", vm, "-U", uuid,
                    "-E", "hash_seed=%s,root_owner=0:0,nodiscard,lazy_itable_init=0" % uuid,
                    "-d", staging, image], check=True, env=env)
    # mke2fs copied each file's times as they were while it read them (ctime is "now", and
    # reading may have moved atime): fix them all.
    commands = os.path.join(staging_root, vm + ".debugfs")
    with open(commands, "w") as f:
        paths = ["/"]
        for dirpath, dirnames, filenames in os.walk(staging):
            for name in sorted(dirnames + filenames):
                paths.append("/" + os.path.relpath(os.path.join(dirpath, name), staging))
        for p in paths:
            for field in ("atime", "ctime", "mtime"):
                f.write('sif "%s" %s @%d\n' % (p, field, FIXED_TIME))
    subprocess.run(["debugfs", "-w", "-f", commands, image], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.unlink(commands)
    shutil.rmtree(staging)
    return image


def manifest_line(image):
    h = hashlib.sha256()
    with open(image, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    st = os.stat(image)
    return "%s size=%d allocated=%d sha256=%s" % (os.path.basename(image), st.st_size,
                                                   st.st_blocks * 512, h.hexdigest())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="small")
    ap.add_argument("--vms", type=int, help="number of VMs (default: the preset's)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    preset = dict(PRESETS[args.preset])
    if args.vms:
        preset["vms"] = args.vms
    if shutil.which("mke2fs") is None:
        sys.exit("make_datasets.py: mke2fs not found (Debian package e2fsprogs)")
    os.makedirs(args.outdir, exist_ok=True)

    # The template: each source's share of the budget, files in sorted order.
    template = []
    for root, share in TEMPLATE_SOURCES:
        template += take(candidates(root), int(preset["template"] * share))
    chosen = set(template)
    packages = [(p, s) for root in PACKAGE_SOURCES for p, s in candidates(root) if p not in chosen]

    # mke2fs -d takes files in the order readdir gives them, so the staging file system is part
    # of the recipe: tmpfs (order of creation) unless $STAGING says otherwise.
    staging_root = os.environ.get("STAGING") or (
        "/dev/shm/vstack-datasets-%d" % os.getpid() if os.path.isdir("/dev/shm")
        else os.path.join(args.outdir, ".staging"))
    lines = []
    for i in range(preset["vms"]):
        image = make_vm(args.outdir, staging_root, i, preset, template, packages, args.seed)
        lines.append(manifest_line(image))
        print(lines[-1], flush=True)
    shutil.rmtree(staging_root, ignore_errors=True)
    with open(os.path.join(args.outdir, "manifest.txt"), "w") as f:
        f.write("# make_datasets.py --preset %s --vms %d --seed %d\n" %
                (args.preset, preset["vms"], args.seed))
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
