#!/usr/bin/env bash
# The Python module as its users get it (docs/python.md), run by ctest as `python`:
#
#   tests/python/run.sh BUILD_DIR [PYTEST ARGS...]
#
# Installs the build into a temporary prefix and runs this folder's pytest suite with only that
# prefix's dist-packages on PYTHONPATH: the module, the libvstack.so it loads and the CLI the
# tests compare it with (VSTACK_CLI) all come from the prefix, not from the build tree. The one
# build-tree piece is the test-only `gate` layer (VSTACK_TEST_GATE, set by ctest; default: the
# build's), loaded into the same process. The Python is the one the module was built for.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
shift
work=$(mktemp -d "${TMPDIR:-/var/tmp}/vstack-python.XXXXXX")
trap 'rm -rf "$work"' EXIT

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; exit 1; }
python=$(sed -n 's/^PYTHON_EXECUTABLE:FILEPATH=//p' "$build/CMakeCache.txt")
export PYTHONPATH=$prefix/lib/python3/dist-packages
export VSTACK_PREFIX=$prefix
export VSTACK_CLI=$prefix/bin/vstack
export VSTACK_TEST_GATE=${VSTACK_TEST_GATE:-$build/tests/python/libvstack_test_gate.so}
export MPLBACKEND=Agg
cd "$work"
"$python" -m pytest -q -p no:cacheprovider "$src/tests/python" "$@"
