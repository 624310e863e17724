#!/bin/bash
# Times two builds of `vstack space` (the exact scan) on the same images, interleaved, ROUNDS
# rounds in one run (docs/space-savings.md, "Exact scan speed"). Prints one line per run:
# the binary's name, wall seconds, user and system CPU seconds. With `cold`, the images' pages
# are dropped from the page cache before each run (posix_fadvise DONTNEED: only these files);
# with `warm`, they are read into it first.
#
#   analysis/space/scan_side_by_side.sh ROUNDS OLD_VSTACK NEW_VSTACK warm|cold IMAGE...
set -euo pipefail
if [ $# -lt 5 ] || { [ "$4" != warm ] && [ "$4" != cold ]; }; then
  echo "usage: $0 ROUNDS OLD_VSTACK NEW_VSTACK warm|cold IMAGE..." >&2
  exit 2
fi
rounds=$1 old=$2 new=$3 cache=$4
shift 4
timing=$(mktemp)
trap 'rm -f "$timing"' EXIT
for _ in $(seq "$rounds"); do
  for v in "$old" "$new"; do
    if [ "$cache" = cold ]; then
      python3 -c 'import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)' "$@"
    else
      cat "$@" >/dev/null
    fi
    /usr/bin/time -f "$v %e %U %S" -o "$timing" "$v" space "$@" >/dev/null
    cat "$timing"
  done
done
