#include "blockdev/metastore/zeroed_array.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace vstack {

uint64_t WrittenPageBytes(const void* p, uint64_t length) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t first = reinterpret_cast<uintptr_t>(p) / page;
  const uint64_t pages = (reinterpret_cast<uintptr_t>(p) + length + page - 1) / page - first;
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return length;
  constexpr uint64_t kPresent = uint64_t{1} << 63, kExclusive = uint64_t{1} << 56;
  std::vector<uint64_t> entries(std::min<uint64_t>(pages, 1 << 16));  // 512 KiB at a time
  uint64_t resident = 0;
  for (uint64_t done = 0; done < pages;) {
    const uint64_t n = std::min<uint64_t>(entries.size(), pages - done);
    const ssize_t got = ::pread(fd, entries.data(), n * 8, static_cast<off_t>((first + done) * 8));
    if (got != static_cast<ssize_t>(n * 8)) {
      ::close(fd);
      return length;
    }
    for (uint64_t i = 0; i < n; ++i) {
      if ((entries[i] & (kPresent | kExclusive)) == (kPresent | kExclusive)) ++resident;
    }
    done += n;
  }
  ::close(fd);
  return std::min(resident * page, length);
}

}  // namespace vstack
