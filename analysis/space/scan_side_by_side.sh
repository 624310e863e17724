#!/bin/bash
# Times two builds of `vstack space` (the exact scan) on the same images, interleaved, ROUNDS
# rounds in one run (docs/space-savings.md, "Exact scan speed"). Prints one line per run: the
# binary's name, wall seconds, user and system CPU seconds. Then it checks that both printed
# the same report (`--output=json`, byte for byte), and prints per binary the median and range
# of the wall and the CPU (user + system) seconds, with the GB/s of allocated data each median
# gives (from the CPU seconds: on two cores the scan has to itself). With `cold`, the images'
# pages are dropped from the page cache before each run (posix_fadvise DONTNEED: only these
# files); with `warm`, they are read into it first.
#
#   analysis/space/scan_side_by_side.sh ROUNDS OLD_VSTACK NEW_VSTACK warm|cold IMAGE...
set -euo pipefail
if [ $# -lt 5 ] || { [ "$4" != warm ] && [ "$4" != cold ]; }; then
  echo "usage: $0 ROUNDS OLD_VSTACK NEW_VSTACK warm|cold IMAGE..." >&2
  exit 2
fi
rounds=$1 old=$2 new=$3 cache=$4
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for _ in $(seq "$rounds"); do
  for v in old new; do
    if [ "$cache" = cold ]; then
      python3 -c 'import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)' "$@"
    else
      cat "$@" >/dev/null
    fi
    bin=${!v}
    /usr/bin/time -f "$bin %e %U %S" -o "$work/timing" "$bin" space --output=json "$@" \
      >"$work/$v.json"
    tee -a "$work/runs" <"$work/timing"
  done
  cmp -s "$work/old.json" "$work/new.json" || {
    echo "the reports differ: diff <($old space --output=json ...) <($new space ...)" >&2
    exit 1
  }
done
python3 - "$work/new.json" "$work/runs" <<'EOF'
import json, statistics, sys
allocated = sum(i["used_bytes"] for i in json.load(open(sys.argv[1]))["images"])
runs = {}
for line in open(sys.argv[2]):
    name, wall, user, system = line.rsplit(maxsplit=3)
    runs.setdefault(name, []).append((float(wall), float(user) + float(system)))
print(f"same report from both; {allocated / 1e9:.3f} GB allocated")
for name, r in runs.items():
    wall = sorted(w for w, _ in r)
    cpu = sorted(c for _, c in r)
    mw, mc = statistics.median(wall), statistics.median(cpu)
    print(f"{name}: wall {mw:.2f} s ({wall[0]:.2f}-{wall[-1]:.2f}), {allocated / mw / 1e9:.2f} GB/s;"
          f" CPU {mc:.2f} s ({cpu[0]:.2f}-{cpu[-1]:.2f}), {2 * allocated / mc / 1e9:.2f} GB/s"
          " on 2 free cores")
EOF
