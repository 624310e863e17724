// The words of a VHD structure's parse errors, shared by the footer and the dynamic header: the
// structure and its offset in the file, what is wrong, and the offending field's own offset, so
// a user can find the byte with a hex dump ("VHD footer at offset 0: ... (field at offset 60)").
#ifndef VSTACK_FORMATS_VHD_VHD_FIELD_ERROR_H_
#define VSTACK_FORMATS_VHD_VHD_FIELD_ERROR_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "lib/errors.h"

namespace vstack::vhd {

// `v` as "0x..." in lower-case hexadecimal.
inline std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// "<structure> at offset <at>: <what> (field at offset <at + field_at>)".
inline Error FieldError(Errc code, const char* structure, uint64_t at, size_t field_at,
                        const std::string& what) {
  return MakeError(code, std::string(structure) + " at offset " + std::to_string(at) + ": " +
                             what + " (field at offset " + std::to_string(at + field_at) + ")");
}

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_FIELD_ERROR_H_
