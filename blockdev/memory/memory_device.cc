#include "blockdev/memory/memory_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "lib/iovec.h"
#include "lib/registry.h"
#include "lib/size.h"

namespace vstack {

struct MemoryDevice::Node {
  std::atomic<void*> slot[kFanout] = {};
};

namespace {

// Every request completes inside Submit: memory I/O is a memcpy.
class MemoryQueue final : public IoQueue {
 public:
  explicit MemoryQueue(MemoryDevice& device) : IoQueue(device), dev_(device) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override {
    for (IoRequest* r : batch) {
      switch (r->op) {
        case Op::kRead: dev_.ReadInto(r->offset, r->iov, r->iovcnt, r->length); break;
        case Op::kWrite: dev_.WriteFrom(r->offset, r->iov, r->iovcnt, r->length); break;
        case Op::kDiscard:
        case Op::kWriteZeroes: dev_.Zero(r->offset, r->length); break;
        case Op::kFlush: break;  // nothing is volatile beyond memory itself
      }
      Complete(*r);
    }
  }

 private:
  MemoryDevice& dev_;
};

}  // namespace

MemoryDevice::MemoryDevice(uint64_t size, uint32_t block, bool read_only)
    : BlockDevice("memory",
                  Geometry{.size_bytes = size, .logical_block = block, .physical_block = block},
                  read_only ? (kCapRead | kCapFlush | kCapExtents | kCapThreadSafe)
                            : (kCapRead | kCapWrite | kCapFlush | kCapDiscard | kCapWriteZeroes |
                               kCapFua | kCapDiscardZeroes | kCapFastZeroes | kCapExtents |
                               kCapThreadSafe)),
      root_(new Node) {
  const uint64_t pages = (size + kPageSize - 1) / kPageSize;
  levels_ = 1;
  while ((pages - 1) >> (kBits * levels_) && levels_ < 6) ++levels_;
}

MemoryDevice::~MemoryDevice() {
  FreeTree(root_, levels_);
  for (char* p : free_pages_) FreePage(p);
  if (slab_ != nullptr) munmap(slab_, slab_bytes_);
}

void MemoryDevice::FreePage(char* page) const {
  if (page >= slab_ && page < slab_ + slab_bytes_) return;
  std::free(page);
}

void MemoryDevice::FreeTree(Node* node, int level) {
  for (auto& s : node->slot) {
    void* child = s.load(std::memory_order_relaxed);
    if (child == nullptr) continue;
    if (level == 1) {
      FreePage(static_cast<char*>(child));
    } else {
      FreeTree(static_cast<Node*>(child), level - 1);
    }
  }
  delete node;
}

namespace {

// The memory the kernel says can be allocated without swapping (MemAvailable), or 0 if unknown.
uint64_t AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

}  // namespace

Status MemoryDevice::Prefill() {
  const uint64_t pages = (geometry().size_bytes + kPageSize - 1) / kPageSize;
  const uint64_t bytes = pages * kPageSize;
  if (const uint64_t available = AvailableMemoryBytes(); available != 0 && bytes > available) {
    return MakeError(SystemError(ENOMEM),
                     "memory: prefill=on needs " + FormatSize(bytes) + " of RAM now, and only " +
                         FormatSize(available) +
                         " is available: give a smaller size, or prefill=off (sparse: pages are "
                         "allocated as they are written)");
  }
  // MAP_POPULATE write-faults every page of a private writable mapping in: the kernel zeroes
  // and maps them all now.
  void* slab = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (slab == MAP_FAILED) {
    const int err = errno;
    return MakeError(SystemError(err), "memory: prefill=on could not map " + FormatSize(bytes) +
                                           ": " + std::strerror(err));
  }
  slab_ = static_cast<char*>(slab);
  slab_bytes_ = bytes;
  for (uint64_t page = 0; page < pages; ++page) {
    Slot(page, true)->store(slab_ + page * kPageSize, std::memory_order_relaxed);
  }
  resident_pages_.store(pages);
  return OkStatus();
}

std::string MemoryDevice::Describe() const {
  return "memory " + FormatSize(geometry().size_bytes) +
         (prefilled() ? " (prefilled RAM, " : " (sparse RAM, ") + FormatSize(resident_bytes()) +
         " resident)";
}

void MemoryDevice::Properties(PropertyList& out) const {
  out.push_back({"resident_bytes", resident_bytes(), "bytes"});
  if (prefilled()) out.push_back({"prefill", true, ""});
}

Result<std::unique_ptr<IoQueue>> MemoryDevice::DoOpenQueue() {
  return std::unique_ptr<IoQueue>(new MemoryQueue(*this));
}

std::atomic<void*>* MemoryDevice::Slot(uint64_t page, bool create) const {
  Node* node = root_;
  for (int level = levels_; level > 1; --level) {
    const uint64_t index = (page >> (kBits * (level - 1))) & (kFanout - 1);
    std::atomic<void*>& s = node->slot[index];
    void* child = s.load(std::memory_order_acquire);
    if (child == nullptr) {
      if (!create) return nullptr;
      Node* fresh = new Node;
      if (s.compare_exchange_strong(child, fresh, std::memory_order_acq_rel)) {
        child = fresh;
      } else {
        delete fresh;  // another thread installed it first; `child` now holds theirs
      }
    }
    node = static_cast<Node*>(child);
  }
  return &node->slot[page & (kFanout - 1)];
}

char* MemoryDevice::AllocatePage() {
  {
    std::lock_guard lock(free_mu_);
    if (!free_pages_.empty()) {
      char* p = free_pages_.back();
      free_pages_.pop_back();
      std::memset(p, 0, kPageSize);
      return p;
    }
  }
  char* p = static_cast<char*>(std::aligned_alloc(kPageSize, kPageSize));
  if (p == nullptr) std::abort();  // out of memory: nothing sensible to do on the data path
  std::memset(p, 0, kPageSize);
  return p;
}

const char* MemoryDevice::PageForRead(uint64_t page) const {
  std::atomic<void*>* s = Slot(page, false);
  return s ? static_cast<const char*>(s->load(std::memory_order_acquire)) : nullptr;
}

char* MemoryDevice::PageForWrite(uint64_t page) {
  std::atomic<void*>* s = Slot(page, true);
  void* p = s->load(std::memory_order_acquire);
  if (p != nullptr) return static_cast<char*>(p);
  char* fresh = AllocatePage();
  if (s->compare_exchange_strong(p, fresh, std::memory_order_acq_rel)) {
    resident_pages_.fetch_add(1, std::memory_order_relaxed);
    return fresh;
  }
  std::lock_guard lock(free_mu_);
  free_pages_.push_back(fresh);
  return static_cast<char*>(p);
}

void MemoryDevice::DropPage(uint64_t page) {
  std::atomic<void*>* s = Slot(page, false);
  if (s == nullptr) return;
  void* p = s->exchange(nullptr, std::memory_order_acq_rel);
  if (p == nullptr) return;
  resident_pages_.fetch_sub(1, std::memory_order_relaxed);
  std::lock_guard lock(free_mu_);
  free_pages_.push_back(static_cast<char*>(p));
}

void MemoryDevice::ReadInto(uint64_t offset, const iovec* iov, uint32_t iovcnt,
                            uint64_t length) const {
  uint64_t done = 0;
  while (done < length) {
    const uint64_t pos = offset + done;
    const uint64_t in_page = pos % kPageSize;
    const uint64_t n = std::min<uint64_t>(kPageSize - in_page, length - done);
    {
      std::lock_guard lock(StripeOf(pos / kPageSize));
      const char* page = PageForRead(pos / kPageSize);
      if (page) {
        CopyToIov(iov, iovcnt, done, page + in_page, n);
      } else {
        ZeroIov(iov, iovcnt, done, n);
      }
    }
    done += n;
  }
}

void MemoryDevice::WriteFrom(uint64_t offset, const iovec* iov, uint32_t iovcnt,
                             uint64_t length) {
  // Read first: after the first write the line stays shared, not written by every queue.
  if (prefilled() && !written_.load(std::memory_order_relaxed)) {
    written_.store(true, std::memory_order_relaxed);
  }
  uint64_t done = 0;
  while (done < length) {
    const uint64_t pos = offset + done;
    const uint64_t in_page = pos % kPageSize;
    const uint64_t n = std::min<uint64_t>(kPageSize - in_page, length - done);
    {
      std::lock_guard lock(StripeOf(pos / kPageSize));
      CopyFromIov(iov, iovcnt, done, PageForWrite(pos / kPageSize) + in_page, n);
    }
    done += n;
  }
}

void MemoryDevice::Zero(uint64_t offset, uint64_t length) {
  uint64_t done = 0;
  while (done < length) {
    const uint64_t pos = offset + done;
    const uint64_t in_page = pos % kPageSize;
    const uint64_t n = std::min<uint64_t>(kPageSize - in_page, length - done);
    std::lock_guard lock(StripeOf(pos / kPageSize));
    if (n == kPageSize) {
      DropPage(pos / kPageSize);
    } else {
      std::atomic<void*>* s = Slot(pos / kPageSize, false);
      char* page = s ? static_cast<char*>(s->load(std::memory_order_acquire)) : nullptr;
      if (page) std::memset(page + in_page, 0, n);
    }
    done += n;
  }
}

uint64_t MemoryDevice::PresentRun(uint64_t page, bool* present) const {
  Node* node = root_;
  for (int level = levels_; level > 1; --level) {
    const int shift = kBits * (level - 1);
    void* child = node->slot[(page >> shift) & (kFanout - 1)].load(std::memory_order_acquire);
    if (child == nullptr) {  // the whole subtree is absent
      *present = false;
      return (((page >> shift) + 1) << shift) - page;
    }
    node = static_cast<Node*>(child);
  }
  *present = node->slot[page & (kFanout - 1)].load(std::memory_order_acquire) != nullptr;
  return 1;
}

Status MemoryDevice::MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  // Absent subtrees of the radix tree are skipped whole, so an empty petabyte maps in a few
  // steps (one per top-level slot), not one per page.
  const uint64_t end = offset + length;
  for (uint64_t pos = offset; pos < end;) {
    bool present = false;
    const uint64_t pages = PresentRun(pos / kPageSize, &present);
    const uint64_t stop = std::min(end, (pos / kPageSize + pages) * kPageSize);
    AppendExtent(out, pos, stop - pos, present ? 0 : (kExtentHole | kExtentZero));
    pos = stop;
  }
  return OkStatus();
}

namespace {

ComponentInfo MemoryComponent() {
  auto open_memory = [](const OptionValues& o, const OpenOptions& open) -> Result<DevicePtr> {
    VSTACK_ASSIGN_OR_RETURN(uint32_t block, o.LogicalBlock("block"));
    VSTACK_ASSIGN_OR_RETURN(uint64_t size, o.PositionalSize(block));
    VSTACK_ASSIGN_OR_RETURN(bool prefill, o.Bool("prefill"));
    auto dev = std::make_unique<MemoryDevice>(size, block, open.read_only);
    if (prefill) VSTACK_RETURN_IF_ERROR(dev->Prefill());
    return DevicePtr(dev.release());
  };
  return BackendComponent(
      "memory", "sparse RAM disk; costs only what is written", "SIZE",
      {{"block", "logical block size: 512 or 4096", "512"},
       {"prefill",
        "on: allocate and touch every page at open (RSS = SIZE), so writes never pay "
        "the first touch; off: sparse",
        "off"}},
      open_memory);
}

}  // namespace

VSTACK_REGISTER_COMPONENT(memory, MemoryComponent());

}  // namespace vstack
