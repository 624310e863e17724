#!/usr/bin/env bash
# The two README commands, on a fresh Debian 12 machine, as root:
#
#   ./dev.sh bench   install what the build and the main job need, build the CLI, run the main job
#   ./dev.sh test    install the rest too, build everything (normal, ASan+UBSan, TSan), run every test
#
# Both are idempotent: packages already installed are not touched, and the builds are
# incremental. Extra arguments after `bench` are passed to the main job.
set -euo pipefail
cd "$(dirname "$0")"

# What the build and the main job need: the compilers, the libraries the library and the CLI
# link (the Ceph client libraries too: the rbd: and rados: backends are always built), and
# nbdkit's plugin header (the `vstack serve` plugin is built with the CLI). The main job runs on
# temporary files and uses no external tool.
BENCH_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  liburing-dev libxxhash-dev libzstd-dev libisal-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev
  nbdkit-plugin-dev librbd-dev librados-dev
)
# What only the tests need on top: the test and benchmark frameworks, the Python module's build
# (pybind11) and its tests (pytest, numpy, pandas, matplotlib), every oracle the tests compare
# against (qemu-img, qemu-io, libvhdi, fio, nbdkit's clients), clang for the TSan and fuzz
# builds, the Ceph daemons of tools/ceph-up, and Doxygen, help2man and dpkg-dev for the install
# test (API reference, man pages, the .deb).
TEST_PACKAGES=(
  git libgtest-dev libgmock-dev libbenchmark-dev
  libvhdi-dev libvhdi-utils qemu-utils fio
  nbdkit libnbd-dev libnbd-bin
  clang libclang-rt-14-dev
  e2fsprogs sqlite3 librsvg2-bin procps
  doxygen help2man dpkg-dev
  python3 python3-dev pybind11-dev
  python3-pytest python3-numpy python3-pandas python3-matplotlib
  ceph-mon ceph-osd ceph-mgr ceph-common libradospp-dev uuid-runtime
)

JOBS=$(nproc)

# install_missing PACKAGE...: installs those that are not installed yet.
install_missing() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

# build DIR [-DNAME=VALUE...] [-- targets...]: configures DIR when it is new or when a VSTACK_
# option differs from its cache (`./dev.sh bench` then `./dev.sh test` turn the tests on in
# `build`; CMake's own variables, such as the compiler, are set once), then builds the targets
# (default: all). A unity build: 16 source files per translation unit, about half the compile
# time (docs/testing.md, "Where CI's time goes").
build() {
  local dir=$1
  shift
  local options=() targets=() configure=0
  while [ $# -gt 0 ] && [ "$1" != -- ]; do options+=("$1"); shift; done
  [ $# -gt 0 ] && shift && targets=(--target "$@")
  [ -f "$dir/build.ninja" ] || configure=1
  for o in "${options[@]}"; do
    [[ $o == -DVSTACK_* ]] || continue
    local name=${o#-D} value=${o#*=}
    name=${name%%=*}
    grep -q "^$name:[A-Z]*=$value\$" "$dir/CMakeCache.txt" 2>/dev/null || configure=1
  done
  if [ $configure = 1 ]; then
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD=ON \
      -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 "${options[@]}"
  fi
  cmake --build "$dir" -j "$JOBS" "${targets[@]}"
}

# The VHD libFuzzer target (tests/fuzz): its own small clang build, and a short run from the
# committed seeds. A crash fails the command and leaves the input in the printed directory.
fuzz_vhd() {
  if [ ! -f build-fuzz/build.ninja ]; then
    cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++
  fi
  cmake --build build-fuzz -j "$JOBS"
  local work
  work=$(mktemp -d "${TMPDIR:-/var/tmp}/vstack-fuzz.XXXXXX")
  echo "== fuzz: vhd for 30 s (inputs and any crash in $work)"
  if ! build-fuzz/vhd_fuzz -max_total_time=30 -artifact_prefix="$work/" "$work" \
      tests/fuzz/corpus/vhd >"$work/log" 2>&1; then
    cat "$work/log"
    return 1
  fi
  tail -n 4 "$work/log"
  echo "== fuzz: vhdx for 20 s (inputs and any crash in $work)"
  mkdir -p "$work/vhdx"
  if ! build-fuzz/vhdx_fuzz -max_total_time=20 -artifact_prefix="$work/" "$work/vhdx" \
      tests/fuzz/corpus/vhdx >"$work/log" 2>&1; then
    cat "$work/log"
    return 1
  fi
  tail -n 4 "$work/log"
  echo "== fuzz: metastore (dedup, zstd, crc32c metadata) for 20 s (inputs and any crash in $work)"
  mkdir -p "$work/metastore"
  if ! build-fuzz/metastore_fuzz -max_total_time=20 -artifact_prefix="$work/" "$work/metastore" \
      tests/fuzz/corpus/metastore >"$work/log" 2>&1; then
    cat "$work/log"
    return 1
  fi
  tail -n 4 "$work/log"
  rm -rf "$work"
}

# `nbdkit vstack spec=...` finds the plugin by short name in nbdkit's plugindir: install the one
# just built there (a copy, so it outlives this clone). See docs/layers/nbd.md.
install_nbdkit_plugin() {
  local dir
  dir=$(pkg-config nbdkit --variable=plugindir)
  if [ -w "$dir" ]; then
    cmake --install build --component nbdkit-plugin >/dev/null
  else
    echo "== note: $dir is not writable; \`nbdkit vstack\` needs build/nbdkit-vstack-plugin.so there"
  fi
}

# The library as users get it: install, exported symbols, the .deb, the examples built against
# the installed package with the source tree moved away (tests/install/run.sh), and the API
# reference (Doxygen; any warning fails).
install_test() {
  tests/install/run.sh build
  echo "== docs: Doxygen"
  cmake --build build --target vstack_docs
}

run_tests() {
  local dir=$1
  echo "== tests: $dir"
  ctest --test-dir "$dir" -j "$JOBS" --output-on-failure --timeout 900
}

case "${1:-}" in
  bench)
    shift
    install_missing "${BENCH_PACKAGES[@]}"
    # The CLI alone: no tests, benchmark suites or Python module (their packages come with
    # `./dev.sh test`, which turns them back on in the same build folder).
    build build -DVSTACK_BUILD_TESTS=OFF -DVSTACK_BUILD_BENCH=OFF -DVSTACK_BUILD_PYTHON=OFF -- vstack
    install_nbdkit_plugin
    # The default matrix (raw, passthrough, fixed and dynamic VHD, dedup, zstd, dedup+zstd) on
    # temporary files under ${TMPDIR:-/var/tmp}, removed at exit; the report folder (index.html,
    # report.json, SVG charts) goes to build/bench-report. Extra arguments are vstack bench knobs.
    ./build/vstack bench --report-dir build/bench-report "$@"
    ;;
  test)
    # Every oracle (qemu-img, qemu-io, fio, nbdkit, ...) is installed above: a missing one
    # fails its test instead of skipping it (tests/testing/test_util.h, ToolsRequired).
    export VSTACK_REQUIRE_TOOLS=1
    install_missing "${BENCH_PACKAGES[@]}" "${TEST_PACKAGES[@]}"
    build build -DVSTACK_BUILD_TESTS=ON -DVSTACK_BUILD_BENCH=ON -DVSTACK_BUILD_PYTHON=ON
    install_nbdkit_plugin
    build build-asan -DVSTACK_SANITIZE=ON -DVSTACK_BUILD_BENCH=OFF
    run_tests build
    install_test
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      run_tests build-asan
    # ThreadSanitizer (clang) on the concurrent paths: the library and one test binary only
    # (tests/tsan/tsan_tests.cmake; TSAN_OPTIONS and the suppressions are set per test).
    build build-tsan -DVSTACK_TSAN=ON -DVSTACK_BUILD_BENCH=OFF -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_C_COMPILER=clang -DVSTACK_TSAN_CLI="$PWD/build/vstack" -- vstack_tsan_tests
    run_tests build-tsan
    fuzz_vhd
    echo "== all tests passed"
    ;;
  *)
    echo "usage: $0 bench|test" >&2
    exit 2
    ;;
esac
