// The version of the vstack library, the same as its CMake package (find_package(vstack 0.2)),
// its pkg-config file and `vstack --version`. Compatibility (docs/library.md, "Versions"):
// before 1.0, releases with the same MAJOR.MINOR are compatible in API and ABI, which is also
// the shared library's SONAME (libvstack.so.MAJOR.MINOR).
#ifndef VSTACK_LIB_VERSION_H_
#define VSTACK_LIB_VERSION_H_

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

// "MAJOR.MINOR.PATCH" of the library this program runs with.
const char* Version();

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_VERSION_H_
