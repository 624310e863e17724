#!/usr/bin/env bash
# NBD overhead, measured side by side (docs/benchmarks.md, "NBD"):
#
#   A. fio 4K random reads at QD32 (bench/nbd/randread-4k-qd32.fio) against nbdkit's own null
#      and memory plugins and against `vstack serve` on null and memory stacks: the vstack
#      plugin's cost inside the same server.
#   B. the same fio job through `vstack serve` on each stack, divided by the same workload run
#      in process (build/bench/nbd_inproc_randread): what NBD costs on top of each stack.
#
# Variants are interleaved (A B C ... A B C ...) for ROUNDS rounds and medians reported.
#
#   bench/nbd/run.sh [ROUNDS=5] [RUNTIME=5]      (after ./dev.sh bench, or a build in build/)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-5}
RUNTIME=${2:-5}
VSTACK=$PWD/build/vstack
INPROC=$PWD/build/bench/nbd_inproc_randread
JOB=$PWD/bench/nbd/randread-4k-qd32.fio
for p in "$VSTACK" "$INPROC"; do [ -x "$p" ] || { echo "missing $p: build first" >&2; exit 1; }; done
for p in fio nbdkit nbdcopy; do command -v $p >/dev/null || { echo "missing $p (./dev.sh installs it)" >&2; exit 1; }; done

tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/vstack-nbd-bench.XXXXXX")
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
sock=$tmp/nbd.sock
uri="nbd+unix:///?socket=$sock"

# 256 MiB of random data: the content of the memory and file stacks.
head -c $((256 << 20)) /dev/urandom > "$tmp/data.img"

have_layer() { "$VSTACK" layers --output=json | grep -q "\"name\": \"$1\""; }

# Stacks for part B: name|spec|prepare (a command run before serving; {dir} = $tmp)
stacks=("null|null:8G|" "memory|memory:256M|prefill" "file|file:$tmp/data.img|" "uring|uring:$tmp/data.img|")
if have_layer vhd; then
  stacks+=("vhd|vhd+file:$tmp/d.vhd|vhd")
fi
if have_layer dedup && have_layer zstd; then
  stacks+=("dedup+zstd|dedup+zstd+file:$tmp/dz.img|dedupzstd")
fi

wait_socket() {
  for _ in $(seq 1 500); do [ -S "$sock" ] && nbdinfo --size "$uri" >/dev/null 2>&1 && return 0; sleep 0.02; done
  echo "server did not start" >&2; exit 1
}
start_server() {  # command...
  rm -f "$sock"
  "$@" >>"$tmp/server.log" 2>&1 &
  server=$!
  wait_socket
}
stop_server() {
  kill -TERM "$server"; wait "$server" || true; server=""
}
fio_iops() {
  NBD_URI=$uri RUNTIME=$RUNTIME fio --output-format=terse --terse-version=3 "$JOB" 2>/dev/null |
    awk -F';' '$1 == 3 { print int($8) }'
}

# One-off preparation of image stacks (created once, served read-only each round).
prepare() {  # name spec how
  case "$3" in
    vhd)
      "$VSTACK" create -f vhd "$tmp/d.vhd" 256M >/dev/null
      start_server "$VSTACK" serve --socket "$sock" "$2"
      nbdcopy "$tmp/data.img" "$uri"; stop_server ;;
    dedupzstd)
      start_server "$VSTACK" serve --socket "$sock" "dedup:size=256M+zstd+file:$tmp/dz.img,create=on,size=512M"
      nbdcopy "$tmp/data.img" "$uri"; stop_server ;;
  esac
}
for s in "${stacks[@]}"; do IFS='|' read -r name spec how <<<"$s"; prepare "$name" "$spec" "$how"; done

declare -A results
record() { results[$1]="${results[$1]:-} $2"; }

for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round/$ROUNDS" >&2
  # A: same server, nbdkit's plugins vs ours.
  start_server nbdkit -f -U "$sock" null 8G;                     record "A nbdkit null" "$(fio_iops)"; stop_server
  start_server "$VSTACK" serve --socket "$sock" null:8G;         record "A vstack null:8G" "$(fio_iops)"; stop_server
  start_server nbdkit -f -U "$sock" memory 256M; nbdcopy "$tmp/data.img" "$uri"
  record "A nbdkit memory" "$(fio_iops)"; stop_server
  start_server "$VSTACK" serve --socket "$sock" memory:256M; nbdcopy "$tmp/data.img" "$uri"
  record "A vstack memory:256M" "$(fio_iops)"; stop_server
  # B: each stack through NBD and in process.
  for s in "${stacks[@]}"; do
    IFS='|' read -r name spec how <<<"$s"
    if [ "$how" = prefill ]; then
      start_server "$VSTACK" serve --socket "$sock" "$spec"; nbdcopy "$tmp/data.img" "$uri"
    else
      start_server "$VSTACK" serve --socket "$sock" --read-only "$spec"
    fi
    record "B nbd $name" "$(fio_iops)"; stop_server
    fill=""; [ "$how" = prefill ] && fill=prefill
    record "B inproc $name" "$("$INPROC" "$spec" "$RUNTIME" $fill | awk '{print int($2)}')"
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2))}'; }
range() { tr ' ' '\n' | grep -v '^$' | sort -n | awk 'NR==1{lo=$1} {hi=$1} END {print lo "-" hi}'; }
m() { echo "${results[$1]}" | median; }

echo
echo "fio randread 4K QD32, 1 job, ${RUNTIME}s per run, $ROUNDS interleaved rounds, medians (IOPS)"
echo
echo "| server | median IOPS | range | vstack / nbdkit |"
echo "|---|---:|---:|---:|"
for pair in "null|null:8G" "memory|memory:256M"; do
  IFS='|' read -r plugin spec <<<"$pair"
  a=$(m "A nbdkit $plugin"); b=$(m "A vstack $spec")
  echo "| nbdkit $plugin | $a | $(echo "${results["A nbdkit $plugin"]}" | range) | |"
  echo "| vstack serve $spec | $b | $(echo "${results["A vstack $spec"]}" | range) | $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.0f%%", 100*b/a}') |"
done
echo
echo "| stack | NBD median IOPS | in-process median IOPS | NBD / in-process |"
echo "|---|---:|---:|---:|"
for s in "${stacks[@]}"; do
  IFS='|' read -r name spec how <<<"$s"
  a=$(m "B nbd $name"); b=$(m "B inproc $name")
  echo "| $name | $a | $b | $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.1f%%", 100*a/b}') |"
done
