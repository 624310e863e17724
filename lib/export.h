// Which declarations libvstack.so exports. The library is compiled with hidden visibility; a
// public header (one installed under include/vstack/, docs/library.md) wraps its declarations
// in these two macros, and exactly those become the shared library's ABI:
//
//   #include "lib/export.h"
//   VSTACK_PUBLIC_BEGIN
//   namespace vstack { ... }
//   VSTACK_PUBLIC_END
//
// Internal headers do not use them, so their classes and functions stay inside the library.
#ifndef VSTACK_LIB_EXPORT_H_
#define VSTACK_LIB_EXPORT_H_

#define VSTACK_PUBLIC_BEGIN _Pragma("GCC visibility push(default)")
#define VSTACK_PUBLIC_END _Pragma("GCC visibility pop")

#endif  // VSTACK_LIB_EXPORT_H_
