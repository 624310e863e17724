#!/usr/bin/env bash
# The library as its users get it (docs/library.md), run by `./dev.sh test`:
#
#   tests/install/run.sh BUILD_DIR
#
#  1. `cmake --install` into a temporary prefix; check the shared library's exports
#     (check_exports.py) and that `vstack --version`, the CMake package and vstack.pc agree.
#  2. Pack the .deb with CPack and install it into a scratch root (dpkg --root); import the
#     Python module from it (tests/python/run.sh runs the module's tests on the prefix).
#  3. Move the source tree out of the way, then build examples/ against the prefix alone (shared,
#     static, and example 1 through pkg-config) and against the scratch root, and run them.
#     The source tree is moved back on exit, also on failure.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
work=$(mktemp -d "${TMPDIR:-/var/tmp}/vstack-install.XXXXXX")
away="$src.away-$$"
cleanup() {
  if [ -d "$away" ] && [ ! -e "$src" ]; then mv "$away" "$src"; fi
  rm -rf "$work"
}
trap cleanup EXIT

prefix=$work/prefix
echo "== install: $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
python3 "$src/tests/install/check_exports.py" "$(echo "$prefix"/lib*/libvstack.so)" \
  "$prefix/include"
package_version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' \
  "$prefix"/lib*/cmake/vstack/vstack-config-version.cmake)
pc_version=$(PKG_CONFIG_PATH=$(echo "$prefix"/lib*/pkgconfig) pkg-config --modversion vstack)
cli_version=$("$prefix/bin/vstack" --version)
echo "versions: package $package_version, pkg-config $pc_version, CLI '$cli_version'"
[ "$cli_version" = "vstack $package_version" ] && [ "$pc_version" = "$package_version" ]
ls "$prefix/share/man/man1/vstack.1" "$prefix/share/man/man1/vstack-create.1" >/dev/null

echo "== .deb"
(cd "$build" && cpack -G DEB -B "$work/deb" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
deb=$(echo "$work"/deb/vstack_*.deb)
root=$work/root
mkdir -p "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/info"
touch "$root/var/lib/dpkg/status"
# The scratch root holds only this package, so dpkg is told to overlook its dependencies.
dpkg --root="$root" --force-depends --force-not-root --force-script-chrootless \
  --log=/dev/null -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; exit 1; }
echo "$(basename "$deb"): $(dpkg -c "$deb" | grep -vc '/$') files, installed into $root"
echo "deb: $("$root/usr/bin/vstack" --version)"
python=$(sed -n 's/^PYTHON_EXECUTABLE:FILEPATH=//p' "$build/CMakeCache.txt")
module=$(PYTHONPATH="$root/usr/lib/python3/dist-packages" "$python" -c \
  'import vstack; print(vstack.__version__, vstack.__file__, vstack.open("memory:1M").size)')
echo "deb: python module $module"
[ "${module%% *}" = "$package_version" ]

cp -r "$src/examples" "$work/examples"
echo "== examples against the prefix alone ($src moved to $away)"
mv "$src" "$away"
cmake -S "$work/examples" -B "$work/examples-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DVSTACK_EXAMPLES_STATIC=ON >"$work/examples-cmake.log" || { cat "$work/examples-cmake.log"; exit 1; }
cmake --build "$work/examples-build" -j "$(nproc)" >"$work/examples-build.log" \
  || { cat "$work/examples-build.log"; exit 1; }
ex=$work/examples-build
"$ex/vhd_roundtrip" "$work/example1.vhd"
"$ex/custom_layer"
"$ex/compare_stacks"
"$ex/convert_image" "$work/example4.vhd"
echo "-- statically linked (vstack::static, no linker flags)"
"$ex/vhd_roundtrip_static" "$work/example1s.vhd"
"$ex/custom_layer_static" passthrough+memory:16M
echo "-- example 1 through pkg-config"
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(echo "$prefix"/lib*/pkgconfig)
# shellcheck disable=SC2046
c++ -o "$work/vhd_roundtrip_pc" "$work/examples/vhd_roundtrip.cc" \
  $(pkg-config --cflags vstack) $(pkg-config --libs vstack) \
  -Wl,-rpath,"$(pkg-config --variable=libdir vstack)"
"$work/vhd_roundtrip_pc" "$work/example1p.vhd" | tail -n 1
unset PKG_CONFIG_PATH
echo "-- example 1 against the .deb in $root"
cmake -S "$work/examples" -B "$work/deb-build" -G Ninja -DCMAKE_PREFIX_PATH="$root/usr" \
  >"$work/deb-cmake.log" || { cat "$work/deb-cmake.log"; exit 1; }
cmake --build "$work/deb-build" --target vhd_roundtrip >"$work/deb-build.log" \
  || { cat "$work/deb-build.log"; exit 1; }
"$work/deb-build/vhd_roundtrip" "$work/example1d.vhd" | tail -n 1
mv "$away" "$src"
echo "== install, exports, .deb and examples: ok"
