// Parsing and printing byte sizes the way qemu-img and fio write them: "4096", "4K", "64M",
// "1.5G", "2T", "512KiB". Suffixes are binary (K = 1024); "B" and "iB" are optional.
#ifndef VSTACK_LIB_SIZE_H_
#define VSTACK_LIB_SIZE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

// Errors name the offending text: "invalid size '12Q': unknown suffix 'Q'".
Result<uint64_t> ParseSize(std::string_view text);

// "64 MiB", "1.5 GiB", "4 KiB", "1000 B": at most 4 significant digits.
std::string FormatSize(uint64_t bytes);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_SIZE_H_
