#!/usr/bin/env bash
# The two README commands, on a fresh Debian 12 machine, as root:
#
#   ./dev.sh bench   install what is missing, build, run the main job
#   ./dev.sh test    install what is missing, build (normal and ASan+UBSan), run every test
#
# Both are idempotent: packages already installed are not touched, and the builds are
# incremental. Extra arguments after `bench` are passed to the main job.
set -euo pipefail
cd "$(dirname "$0")"

# Every Debian package vstack builds with or tests against.
PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  liburing-dev libxxhash-dev libzstd-dev libisal-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev
  libvhdi-dev libvhdi-utils qemu-utils fio
  nbdkit nbdkit-plugin-dev libnbd-dev libnbd-bin
  clang libclang-rt-14-dev
  e2fsprogs sqlite3 librsvg2-bin procps
)

JOBS=$(nproc)

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

# build DIR [cmake options...]
build() {
  local dir=$1
  shift
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
  fi
  cmake --build "$dir" -j "$JOBS"
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

run_tests() {
  local dir=$1
  echo "== tests: $dir"
  ctest --test-dir "$dir" -j "$JOBS" --output-on-failure --timeout 900
}

case "${1:-}" in
  bench)
    shift
    install_missing
    build build
    install_nbdkit_plugin
    tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/vstack-main.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    ./build/vstack info "passthrough+file:$tmp/disk.img,create=on,size=64M" "$@"
    ;;
  test)
    install_missing
    build build
    install_nbdkit_plugin
    build build-asan -DVSTACK_SANITIZE=ON -DVSTACK_BUILD_BENCH=OFF
    run_tests build
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      run_tests build-asan
    echo "== all tests passed"
    ;;
  *)
    echo "usage: $0 bench|test" >&2
    exit 2
    ;;
esac
