#!/usr/bin/env bash
# VHD against qemu's vpc driver with qemu-img bench's own access pattern (docs/benchmarks.md,
# "VHD"). For each cache mode (writeback: the page cache, as qemu-img bench's default; none:
# O_DIRECT) and each round, every target gets its own copy of one fresh `qemu-img create -f
# vpc` image (or a sparse raw file) and runs, in turn, interleaved with the other targets:
#   fresh   COUNT sequential SIZE writes at DEPTH into the fresh image (allocating blocks)
#   alloc-w the same writes again (every block now allocated)
#   alloc-r the same pattern as reads
# Targets: qemu-img bench -f vpc, qemu_bench_driver on vhd+uring, and both tools on raw.
# Prints the median IOPS of each, and the ratios.
#
#   bench/vhd_vs_qemu.sh [BUILD_DIR] [ROUNDS] [COUNT]      e.g. bench/vhd_vs_qemu.sh build 5
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-5}
COUNT=${3:-75000}
DEPTH=32
SIZE=4K
DRIVER=$BUILD/bench/qemu_bench_driver
[ -x "$DRIVER" ] || { echo "build $DRIVER first (cmake --build $BUILD)" >&2; exit 2; }
command -v qemu-img >/dev/null || { echo "qemu-img is missing (./dev.sh installs qemu-utils)" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/vhd-vs-qemu.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cp "$DRIVER" "$WORK/driver"  # immune to rebuilds during the run
DRIVER=$WORK/driver
RESULTS=$WORK/results.tsv

# run MODE PHASE TARGET IMAGE: one timed run, appended to $RESULTS as IOPS.
run() {
  local mode=$1 phase=$2 target=$3 image=$4 rw="-w" out
  [ "$phase" = alloc-r ] && rw=""
  case $target in
    qemu-vpc|qemu-raw)
      local fmt=vpc cache=()
      [ "$target" = qemu-raw ] && fmt=raw
      [ "$mode" = none ] && cache=(-t none -n)
      out=$(qemu-img bench "${cache[@]}" $rw -c "$COUNT" -d $DEPTH -s $SIZE --pattern=165 -f $fmt "$image")
      ;;
    vstack-vhd|vstack-raw)
      local spec="uring:$image"
      [ "$target" = vstack-vhd ] && spec="vhd+$spec"
      [ "$mode" = none ] && spec="$spec,direct=on"
      out=$("$DRIVER" $rw -c "$COUNT" -d $DEPTH -s $SIZE --pattern=165 "$spec")
      ;;
  esac
  local secs
  secs=$(sed -n 's/^Run completed in \([0-9.]*\) seconds\./\1/p' <<<"$out")
  awk -v m="$mode" -v p="$phase" -v t="$target" -v c="$COUNT" -v s="$secs" \
    'BEGIN { printf "%s\t%s\t%s\t%.0f\n", m, p, t, c / s }' >>"$RESULTS"
}

TARGETS=(qemu-vpc vstack-vhd qemu-raw vstack-raw)
for mode in writeback none; do
  for round in $(seq "$ROUNDS"); do
    echo "== cache=$mode round $round/$ROUNDS" >&2
    qemu-img create -q -f vpc "$WORK/base.vhd" 1G
    for t in "${TARGETS[@]}"; do
      case $t in
        *-vpc|*-vhd) cp --sparse=always "$WORK/base.vhd" "$WORK/$t.img" ;;
        *) rm -f "$WORK/$t.img"; truncate -s 1G "$WORK/$t.img" ;;
      esac
    done
    for phase in fresh alloc-w alloc-r; do
      for t in "${TARGETS[@]}"; do run "$mode" "$phase" "$t" "$WORK/$t.img"; done
    done
    rm -f "$WORK"/*.img "$WORK/base.vhd"
  done
done

echo
echo "qemu-img bench pattern: $COUNT x $SIZE sequential, depth $DEPTH; median IOPS of $ROUNDS interleaved rounds"
awk -F'\t' '
  { v[$1 "|" $2 "|" $3] = v[$1 "|" $2 "|" $3] " " $4 }
  function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    printf "| cache | phase | qemu vpc | vstack vhd | qemu raw | vstack raw | vhd / qemu vpc | vhd / vstack raw |\n"
    printf "|---|---|---:|---:|---:|---:|---:|---:|\n"
    split("writeback none", modes, " "); split("fresh alloc-w alloc-r", phases, " ")
    for (m = 1; m <= 2; m++) for (p = 1; p <= 3; p++) {
      k = modes[m] "|" phases[p] "|"
      q = median(v[k "qemu-vpc"]); s = median(v[k "vstack-vhd"])
      qr = median(v[k "qemu-raw"]); sr = median(v[k "vstack-raw"])
      printf "| %s | %s | %d | %d | %d | %d | %.2fx | %.2f |\n", modes[m], phases[p], q, s, qr, sr, s / q, s / sr
    }
  }' "$RESULTS"
