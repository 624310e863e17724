#!/usr/bin/env bash
# NBD overhead, measured side by side (docs/benchmarks.md, "NBD"):
#
#   A. fio 4K random reads at QD32 (bench/nbd/randread-4k-qd32.fio) against nbdkit's own null
#      and memory plugins and against `vstack serve` on null and memory stacks: the vstack
#      plugin's cost inside the same server.
#   B. the same fio job through `vstack serve` on each stack, divided by the same workload run
#      in process by `vstack bench` (4K random reads, QD32, one thread, the whole device): what
#      NBD costs on top of each stack.
#
# Variants are interleaved (A B C ... A B C ...) for ROUNDS rounds and medians reported.
#
#   bench/nbd/run.sh [ROUNDS=5] [RUNTIME=5] [PARTS=ab]   (after ./dev.sh bench, or a build in build/)
#
# PARTS=a runs part A only (more rounds in the same time: its pairs are what the >= 80% target
# is about), PARTS=b part B only.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-5}
RUNTIME=${2:-5}
PARTS=${3:-ab}
case "$PARTS" in a|b|ab) ;; *) echo "PARTS must be a, b or ab, not '$PARTS'" >&2; exit 2 ;; esac
VSTACK=$PWD/build/vstack
JOB=$PWD/bench/nbd/randread-4k-qd32.fio
[ -x "$VSTACK" ] || { echo "missing $VSTACK: build first" >&2; exit 1; }
for p in fio nbdkit nbdcopy python3; do command -v $p >/dev/null || { echo "missing $p (./dev.sh installs it)" >&2; exit 1; }; done

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
[[ $PARTS == *b* ]] || stacks=()

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
cpu_ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }  # utime + stime of the server
# fio_iops, also recording the server's CPU time per request (microseconds) under "$1 cpu":
# a measure that the other tenants of this machine disturb much less than IOPS.
fio_iops_cpu() {
  local t0 out iops
  t0=$(cpu_ticks)
  out=$(NBD_URI=$uri RUNTIME=$RUNTIME fio --output-format=terse --terse-version=3 "$JOB" 2>/dev/null |
    awk -F';' '$1 == 3 { print int($8), $6 / 4 }')
  iops=${out%% *}
  record "$1" "$iops"
  record "$1 cpu" "$(awk -v t="$(( $(cpu_ticks) - t0 ))" -v n="${out##* }" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%.2f", t / hz * 1e6 / n}')"
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

measure_a() {  # which: nbdkit-null vstack-null nbdkit-memory vstack-memory
  case "$1" in
    nbdkit-null) start_server nbdkit -f -U "$sock" null 8G; fio_iops_cpu "A nbdkit null" ;;
    vstack-null) start_server "$VSTACK" serve --socket "$sock" null:8G; fio_iops_cpu "A vstack null:8G" ;;
    nbdkit-memory) start_server nbdkit -f -U "$sock" memory 256M; nbdcopy "$tmp/data.img" "$uri"
      fio_iops_cpu "A nbdkit memory" ;;
    vstack-memory) start_server "$VSTACK" serve --socket "$sock" memory:256M; nbdcopy "$tmp/data.img" "$uri"
      fio_iops_cpu "A vstack memory:256M" ;;
  esac
  stop_server
}
measure_b() {  # nbd|inproc name spec how
  if [ "$1" = nbd ]; then
    if [ "$4" = prefill ]; then
      start_server "$VSTACK" serve --socket "$sock" "$3"; nbdcopy "$tmp/data.img" "$uri"
    else
      start_server "$VSTACK" serve --socket "$sock" --read-only "$3"
    fi
    fio_iops_cpu "B nbd $2"; stop_server
  else
    # The job of $JOB in process: --size 0 is the whole device, like fio's; a memory stack is
    # filled first (--prepare auto), persistent ones are read as they are.
    local out
    out=$("$VSTACK" bench --stack "$3" --bs 4K --write-pct 0 --qd 32 --threads 1 --size 0 \
      --duration "${RUNTIME}s" --rounds 1 --no-report --quiet --output=json |
      python3 -c 'import json, sys
s = json.load(sys.stdin)["stacks"][0]
print("error: " + s["error"] if s["error"] else "%s %s" % (s["summary"]["iops"]["median"], s["summary"]["cpu_us_per_io"]))')
    case "$out" in error*) echo "vstack bench on $3: $out" >&2; exit 1 ;; esac
    record "B inproc $2" "${out%% *}"
    record "B inproc $2 cpu" "$(printf '%.2f' "${out##* }")"
  fi
}

for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round/$ROUNDS" >&2
  # Pairs run back to back, in A B B A order on alternate rounds, so that the load of this
  # shared machine drifts over both halves of a pair alike; ratios are taken per round.
  if [ $((round % 2)) = 1 ]; then order="nbdkit-null vstack-null nbdkit-memory vstack-memory"
  else order="vstack-null nbdkit-null vstack-memory nbdkit-memory"; fi
  [[ $PARTS == *a* ]] && for v in $order; do measure_a "$v"; done
  for s in "${stacks[@]}"; do
    IFS='|' read -r name spec how <<<"$s"
    if [ $((round % 2)) = 1 ]; then sides="nbd inproc"; else sides="inproc nbd"; fi
    for side in $sides; do measure_b "$side" "$name" "$spec" "$how"; done
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
range() { tr ' ' '\n' | grep -v '^$' | sort -n | awk 'NR==1{lo=$1} {hi=$1} END {print lo "-" hi}'; }
m() { echo "${results[$1]}" | median | awk '{printf "%d", $1}'; }
# The per-round ratios of two series (numerator / denominator), as percentages.
ratios() { paste <(echo "${results[$1]}" | tr ' ' '\n' | grep -v '^$') <(echo "${results[$2]}" | tr ' ' '\n' | grep -v '^$') |
  awk '{printf "%.2f ", 100*$1/$2}'; }

cpu() { echo "${results["$1 cpu"]}" | median | awk '{printf "%.1f us", $1}'; }
if [[ $PARTS == *a* ]]; then
  echo
  echo "fio randread 4K QD32, 1 job, ${RUNTIME}s per run, $ROUNDS interleaved rounds; medians of IOPS and of per-round ratios"
  echo
  echo "| server | median IOPS | range | IOPS vstack / nbdkit (median of rounds) | server CPU per request (median) | CPU vstack / nbdkit (median of rounds) |"
  echo "|---|---:|---:|---:|---:|---:|"
  for pair in "null|null:8G" "memory|memory:256M"; do
    IFS='|' read -r plugin spec <<<"$pair"
    r=$(ratios "A vstack $spec" "A nbdkit $plugin")
    c=$(ratios "A vstack $spec cpu" "A nbdkit $plugin cpu")
    echo "| nbdkit $plugin | $(m "A nbdkit $plugin") | $(echo "${results["A nbdkit $plugin"]}" | range) | | $(cpu "A nbdkit $plugin") | |"
    echo "| vstack serve $spec | $(m "A vstack $spec") | $(echo "${results["A vstack $spec"]}" | range) | $(echo "$r" | median | awk '{printf "%.0f%%", $1}') ($r) | $(cpu "A vstack $spec") | $(echo "$c" | median | awk '{printf "%.0f%%", $1}') |"
  done
fi
if [[ $PARTS == *b* ]]; then
  echo
  echo "| stack | NBD median IOPS | in-process median IOPS | NBD / in-process, median of rounds | server CPU per request | in-process CPU per request |"
  echo "|---|---:|---:|---:|---:|---:|"
  for s in "${stacks[@]}"; do
    IFS='|' read -r name spec how <<<"$s"
    r=$(ratios "B nbd $name" "B inproc $name")
    echo "| $name | $(m "B nbd $name") | $(m "B inproc $name") | $(echo "$r" | median | awk '{printf "%.1f%%", $1}') ($r) | $(cpu "B nbd $name") | $(cpu "B inproc $name") |"
  done
fi
