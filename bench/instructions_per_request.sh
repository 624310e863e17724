#!/usr/bin/env bash
# Instructions per request of the micro-benchmark cases, counted by callgrind: exact and
# independent of the machine's load (docs/benchmarks.md, "Near-free accounting").
#
#   bench/instructions_per_request.sh BUILD_DIR [BUILD_DIR...]
#
# For each build directory, runs each case once under callgrind, counting only inside
# QueueDriver::Run (one Run of kBatch requests: 8192 in vhd_bench, 4096 in layers_bench), and
# prints the instructions per request and the difference to the bare device of its suite.
# Build the suites first: cmake --build BUILD_DIR --target vhd_bench layers_bench
set -euo pipefail

if [[ $# -eq 0 ]]; then
  echo "usage: $0 BUILD_DIR [BUILD_DIR...]" >&2
  exit 2
fi

# suite  filter  requests-per-Run  label
CASES=(
  "layers_bench ^BM_Layer/bare/memory_read/32$ 4096 bare"
  "layers_bench ^BM_Layer/passthrough/memory_read/32$ 4096 passthrough"
  "layers_bench ^BM_Layer/passthrough\\+passthrough\\+passthrough\\+passthrough/memory_read/32$ 4096 passthrough-x4"
  "layers_bench ^BM_LayerLatencyStats/bare/memory_read/32$ 4096 latency-bare"
  "layers_bench ^BM_LayerLatencyStats/passthrough\\+passthrough\\+passthrough\\+passthrough/memory_read/32$ 4096 latency-x4"
  "vhd_bench ^BM_Memory_Raw_Read/32/real_time$ 8192 raw"
  "vhd_bench ^BM_Memory_VhdFixed_Read/32/real_time$ 8192 vhd-fixed"
  "vhd_bench ^BM_Memory_VhdDynamic_Read/32/real_time$ 8192 vhd-dynamic"
  "vhd_bench ^BM_Memory_VhdxDynamic_Read/32/real_time$ 8192 vhdx-dynamic"
)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for build in "$@"; do
  declare -A per_request=()
  for c in "${CASES[@]}"; do
    read -r suite filter requests label <<<"$c"
    file="$out/callgrind.$label"
    valgrind --tool=callgrind --callgrind-out-file="$file" \
      --toggle-collect='vstack::bench::QueueDriver::Run*' \
      "$build/bench/$suite" --benchmark_filter="$filter" --benchmark_min_time=0.000001 \
      >/dev/null 2>"$out/log.$label" || { cat "$out/log.$label" >&2; exit 1; }
    total=$(awk '/^summary:/ {print $2}' "$file")
    per_request[$label]=$(( (total + requests / 2) / requests ))
  done
  echo "$build"
  printf '  %-14s %8s %8s\n' case instr/req "over bare"
  for label in bare passthrough passthrough-x4 latency-bare latency-x4 raw vhd-fixed vhd-dynamic vhdx-dynamic; do
    base=${per_request[raw]}
    [[ $label == bare || $label == passthrough* ]] && base=${per_request[bare]}
    [[ $label == latency-* ]] && base=${per_request[latency-bare]}
    printf '  %-14s %8d %+8d\n' "$label" "${per_request[$label]}" $(( per_request[$label] - base ))
  done
  printf '  %-14s %8s %+8d\n' "per level (x4)" "" $(( (${per_request[passthrough-x4]} - ${per_request[bare]}) / 4 ))
  # With latency statistics on every level: what `vstack bench` runs (issue 27 item 4).
  printf '  %-14s %8s %+8d\n' "latency, level" "" $(( (${per_request[latency-x4]} - ${per_request[latency-bare]}) / 4 ))
  unset per_request
done
