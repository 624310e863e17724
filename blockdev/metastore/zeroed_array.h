// ZeroedArray<T>: a fixed-size array, all zero at first, whose memory is reserved, not taken:
// an anonymous mapping without swap reservation, which the kernel backs a page at a time on its
// first write. Reading a page never written costs no memory (the kernel's zero page), so an
// array sized by a large device holds only the pages of what was written. Sized once, up front;
// plain (not atomic) access, for a caller that holds its own lock (AtomicArray gives atomic
// access to the same kind of memory). T is trivially copyable.
#ifndef VSTACK_BLOCKDEV_METASTORE_ZEROED_ARRAY_H_
#define VSTACK_BLOCKDEV_METASTORE_ZEROED_ARRAY_H_

#include <sys/mman.h>

#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

namespace vstack {

// Bytes of [p, p+length) that hold a page of their own: pages present and mapped by this
// process alone, read from /proc/self/pagemap (bits 63 and 56). A page only ever read maps the
// kernel's shared zero page and costs no memory, so it does not count (mincore would count
// it). `length` itself where pagemap cannot be read.
uint64_t WrittenPageBytes(const void* p, uint64_t length);

template <typename T>
class ZeroedArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  explicit ZeroedArray(uint64_t size = 0) : size_(size) {
    if (size == 0) return;
    void* p = mmap(nullptr, bytes(), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<T*>(p);
  }
  ZeroedArray(ZeroedArray&& o) noexcept
      : size_(std::exchange(o.size_, 0)), data_(std::exchange(o.data_, nullptr)) {}
  ZeroedArray& operator=(ZeroedArray&& o) noexcept {
    std::swap(size_, o.size_);
    std::swap(data_, o.data_);
    return *this;
  }
  ~ZeroedArray() {
    if (data_) munmap(data_, bytes());
  }

  uint64_t size() const { return size_; }
  // Bytes reserved (the pages actually used are those written so far).
  uint64_t bytes() const { return size_ * sizeof(T); }
  // Bytes of the pages written so far: the memory the array takes (WrittenPageBytes).
  uint64_t resident_bytes() const { return data_ ? WrittenPageBytes(data_, bytes()) : 0; }
  // REQUIRES: i < size().
  T& operator[](uint64_t i) { return data_[i]; }
  const T& operator[](uint64_t i) const { return data_[i]; }
  T* data() const { return data_; }

 private:
  uint64_t size_ = 0;
  T* data_ = nullptr;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_ZEROED_ARRAY_H_
