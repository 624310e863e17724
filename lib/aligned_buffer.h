// A heap buffer aligned for O_DIRECT I/O. Move-only; zero-filled on allocation.
#ifndef VSTACK_LIB_ALIGNED_BUFFER_H_
#define VSTACK_LIB_ALIGNED_BUFFER_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // REQUIRES: alignment is a power of two.
  explicit AlignedBuffer(size_t size, size_t alignment = 4096) : size_(size) {
    if (alignment < sizeof(void*)) alignment = sizeof(void*);
    const size_t rounded = (size + alignment - 1) / alignment * alignment;
    data_ = static_cast<std::byte*>(std::aligned_alloc(alignment, rounded ? rounded : alignment));
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(data_, 0, rounded ? rounded : alignment);
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  ~AlignedBuffer() { std::free(data_); }

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<std::byte> span() { return {data_, size_}; }
  std::span<const std::byte> span() const { return {data_, size_}; }
  iovec iov() { return iovec{data_, size_}; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_ALIGNED_BUFFER_H_
