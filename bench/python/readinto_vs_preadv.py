#!/usr/bin/env python3
"""What a Python loop pays per 4 KiB read through vstack, against the plainest read Python has.

Three variants read 4 KiB at a time, sequentially and wrapping, into one preallocated buffer:

  preadv          os.preadv(fd, [buf], offset) on a file in tmpfs (/dev/shm by default)
  vstack-memory   Device.readinto(offset, buf) on vstack.open("memory:SIZE") (memory speed)
  vstack-file     Device.readinto(offset, buf) on vstack.open("file:PATH") of the same tmpfs file

Each round runs every variant for --calls reads, in a rotating order (interleaved, so that the
machine's load drifts over all of them alike), and takes the mean time per call. The report
gives, per variant, the median over rounds with the min-max range, and the ratio to preadv of
the same round (median, min-max).

  PYTHONPATH=build/python python3 bench/python/readinto_vs_preadv.py [--rounds 15]
"""

import argparse
import os
import statistics
import tempfile
import time

import vstack

BLOCK = 4096


def timed_loop(read, offsets, buf):
    start = time.perf_counter_ns()
    for off in offsets:
        read(off, buf)
    return (time.perf_counter_ns() - start) / len(offsets)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=64 << 20, help="bytes of the file and device")
    parser.add_argument("--calls", type=int, default=200_000, help="reads per variant per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--dir", default="/dev/shm", help="a tmpfs directory for the file")
    args = parser.parse_args()

    data = os.urandom(args.size)
    with tempfile.NamedTemporaryFile(dir=args.dir, prefix="vstack-readinto-") as f:
        f.write(data)
        f.flush()
        fd = os.open(f.name, os.O_RDONLY)
        memory = vstack.open(f"memory:{args.size}")
        for off in range(0, args.size, 1 << 20):
            memory.write(off, data[off:off + (1 << 20)])
        onfile = vstack.open("file:" + f.name, read_only=True)
        buf = bytearray(BLOCK)
        offsets = [(i * BLOCK) % args.size for i in range(args.calls)]
        variants = {
            "preadv": lambda off, b: os.preadv(fd, [b], off),
            "vstack-memory": memory.readinto,
            "vstack-file": onfile.readinto,
        }
        for read in variants.values():  # warm up: pages, queues, caches
            timed_loop(read, offsets[:20_000], buf)
        names = list(variants)
        per_call = {name: [] for name in names}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                per_call[name].append(timed_loop(variants[name], offsets, buf))
        memory.close()
        onfile.close()
        os.close(fd)

    print(f"4 KiB reads into one bytearray, {args.calls} per variant per round, "
          f"{args.rounds} rounds interleaved; ns per call and ratio to preadv (same round)")
    print(f"{'variant':<15} {'median':>8} {'min-max':>15}  {'ratio':>6} {'min-max':>13}")
    for name in names:
        ns = per_call[name]
        ratios = [a / b for a, b in zip(ns, per_call["preadv"])]
        print(f"{name:<15} {statistics.median(ns):8.0f} {min(ns):7.0f}-{max(ns):<7.0f}"
              f"  {statistics.median(ratios):6.2f} {min(ratios):6.2f}-{max(ratios):<6.2f}")


if __name__ == "__main__":
    main()
