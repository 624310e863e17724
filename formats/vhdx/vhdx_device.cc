#include "formats/vhdx/vhdx_device.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>

#include "formats/vhdx/vhdx_io.h"
#include "formats/vhdx/vhdx_log.h"
#include "lib/aligned_buffer.h"
#include "lib/endian.h"
#include "lib/iovec.h"
#include "lib/plural.h"
#include "lib/progress.h"
#include "lib/size.h"
#include "lib/sync_io.h"

namespace vstack::vhdx {
namespace {

std::vector<std::string> CounterNames() {
  return {"allocations",     "log_entries",   "log_bytes",          "log_flushes",
          "bat_page_writes", "header_writes", "zero_filled_blocks", "zero_filled_reads"};
}

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

bool Readable(uint8_t state) { return state == kFullyPresent; }

// One queue: pieces of present blocks go down asynchronously; the pieces of a batch that need
// allocation are group-committed once the batch is translated, and flushes are done in place,
// both blocking this queue (VhdxDevice::Allocate).
class VhdxQueue final : public LayerQueue {
 public:
  VhdxQueue(VhdxDevice& device, std::unique_ptr<IoQueue> lower)
      : LayerQueue(device, std::move(lower)), dev_(device) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override {
    for (IoRequest* req : batch) Start(*req);
    if (!pending_.empty()) {
      std::vector<IoRequest*> children;
      children.swap(pending_);
      lower().Submit(children);
      children.clear();
      if (pending_.empty()) pending_.swap(children);
    }
    if (!allocs_.empty()) CommitAllocations();
  }

 private:
  struct Parent {
    IoRequest* req = nullptr;
    uint32_t pending = 0;
    std::error_code status;
  };
  struct Child {
    IoRequest req;
    std::vector<iovec> iov;
    Parent* parent = nullptr;
    VhdxQueue* queue = nullptr;
  };

  void Start(IoRequest& req) {
    if (req.op == Op::kFlush) {
      Status s = dev_.Flush(lower());
      Complete(req, s ? std::error_code() : s.error().code);
      return;
    }
    if (req.op != Op::kRead && req.op != Op::kWrite) {
      Complete(req, Errc::kNotSupported);
      return;
    }
    if (req.op == Op::kWrite) {
      if (Status s = dev_.BeginWrites(lower()); !s) {
        Complete(req, s.error().code);
        return;
      }
    }
    Parent* p = parents_.Get();
    p->req = &req;
    p->pending = 1;  // held until every piece has been started
    p->status = {};
    const uint64_t bs = dev_.image().layout.block_size;
    for (uint64_t done = 0; done < req.length;) {
      const uint64_t pos = req.offset + done;
      const uint64_t block = pos / bs;
      const uint64_t in_block = pos % bs;
      const uint64_t n = std::min(req.length - done, bs - in_block);
      const uint64_t e = dev_.Entry(block);
      const uint8_t state = EntryState(e);
      if (state == kUnusableState) {
        p->status = Errc::kCorruption;
      } else if (Readable(state)) {
        Child* c = children_.Get();
        c->parent = p;
        c->queue = this;
        c->iov.clear();
        IovSlice(req.iov, req.iovcnt, done, n, &c->iov);
        c->req.op = req.op;
        c->req.flags = 0;
        c->req.offset = EntryOffset(e) + in_block;
        c->req.length = n;
        c->req.iov = c->iov.data();
        c->req.iovcnt = static_cast<uint32_t>(c->iov.size());
        c->req.on_complete = &VhdxQueue::OnChildDone;
        c->req.user_data = c;
        ++p->pending;
        pending_.push_back(&c->req);
      } else if (req.op == Op::kRead) {
        ZeroIov(req.iov, req.iovcnt, done, n);
        Count(kCounterZeroReads);
      } else {
        Allocation& a = allocs_.emplace_back();
        a.block = block;
        a.in_block = in_block;
        a.length = n;
        a.iov.clear();
        IovSlice(req.iov, req.iovcnt, done, n, &a.iov);
        a.owner = p;
        a.status = {};
        ++p->pending;
      }
      done += n;
    }
    Release(p);
  }

  // Allocates the batch's writes to blocks that were not present, as one group. Completing a
  // request may submit more (and queue allocations again): the list is taken first.
  void CommitAllocations() {
    std::vector<Allocation> allocs;
    allocs.swap(allocs_);
    std::vector<Allocation*> group;
    for (Allocation& a : allocs) group.push_back(&a);
    dev_.Allocate(lower(), group);
    for (Allocation& a : allocs) {
      Parent* p = static_cast<Parent*>(a.owner);
      if (a.status && !p->status) p->status = a.status;
      Release(p);
    }
  }

  void Release(Parent* p) {
    if (--p->pending > 0) return;
    Complete(*p->req, p->status);
    parents_.Put(p);
  }

  static void OnChildDone(IoRequest& req) {
    Child* c = static_cast<Child*>(req.user_data);
    Parent* p = c->parent;
    if (req.status && !p->status) p->status = req.status;
    VhdxQueue* q = c->queue;
    q->children_.Put(c);
    q->Release(p);
  }

  VhdxDevice& dev_;
  RequestPool<Parent> parents_;
  RequestPool<Child> children_;
  std::vector<IoRequest*> pending_;
  std::vector<Allocation> allocs_;  // pieces of this batch that allocate
};

}  // namespace

Result<DevicePtr> VhdxDevice::Open(DevicePtr lower, const VhdxOptions& options) {
  const Geometry& g = lower->geometry();
  if (g.mem_alignment > 4096) {
    return MakeError(Errc::kInvalidArgument, "vhdx: the device below needs " +
                                                 std::to_string(g.mem_alignment) +
                                                 "-byte memory alignment (at most 4096)");
  }
  SyncIo io(*lower);
  IoQueue* q = io.queue();
  if (q == nullptr) return io.open_error();
  VSTACK_ASSIGN_OR_RETURN(VhdxImage image,
                          LoadImage(*lower, *q, !lower->read_only(), options.for_check));
  if (image.metadata.logical_sector < g.logical_block) {
    return MakeError(Errc::kInvalidArgument,
                     "vhdx: the image has " + std::to_string(image.metadata.logical_sector) +
                         "-byte logical sectors, but the device below has " +
                         std::to_string(g.logical_block) + "-byte blocks");
  }
  return DevicePtr(new VhdxDevice(std::move(lower), std::move(image)));
}

VhdxDevice::VhdxDevice(DevicePtr lower, VhdxImage image)
    : Layer("vhdx", std::move(lower)),
      image_(std::move(image)),
      bat_(new std::atomic<uint64_t>[image_.bat.size()]),
      growable_(lower_device().Has(kCapResizable)),
      opened_file_size_(image_.file_size) {
  for (size_t i = 0; i < image_.bat.size(); ++i) bat_[i].store(image_.bat[i]);
  image_.bat.clear();
  image_.bat.shrink_to_fit();
  Geometry& g = mutable_geometry();
  g.size_bytes = image_.metadata.virtual_size;
  g.logical_block = image_.metadata.logical_sector;
  g.physical_block = std::max(image_.metadata.physical_sector, g.logical_block);
  g.optimal_transfer = image_.layout.block_size;
  DeclareCounters(CounterNames());
  const Capabilities below = lower_device().capabilities();
  set_capabilities(kCapRead | kCapFlush | kCapExtents |
                   (below & (kCapWrite | kCapPersistent | kCapThreadSafe)));
  // New blocks go past every structure and block, 1 MiB aligned; in a file, past its end too.
  // (A device that cannot grow keeps its free space after the last block.)
  uint64_t end = image_.metadata_end;
  if (growable_) end = std::max(end, lower_device().size_bytes());
  for (uint64_t i = 0; i < image_.layout.entries; ++i) {
    const uint64_t e = bat_[i].load();
    if (EntryOffset(e) != 0 && EntryState(e) != kUnusableState) {
      end = std::max(
          end, EntryOffset(e) +
                   (image_.layout.IsBitmapIndex(i) ? kMiB : uint64_t{image_.layout.block_size}));
    }
  }
  file_end_ = AlignUp(end, kMiB);
}

VhdxDevice::~VhdxDevice() = default;

Result<std::unique_ptr<IoQueue>> VhdxDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return std::unique_ptr<IoQueue>(new VhdxQueue(*this, std::move(lower)));
}

Status VhdxDevice::BeginWrites(IoQueue& q) {
  if (writing_.load(std::memory_order_acquire)) return OkStatus();
  std::lock_guard<IoMutex> lock(mu_);
  if (writing_.load(std::memory_order_relaxed)) return OkStatus();
  VSTACK_RETURN_IF_ERROR(SettleLength(lower_device(), q, &image_));
  Header h = image_.header;
  h.file_write = Guid::Random();
  h.data_write = Guid::Random();
  h.log_guid = Guid::Random();
  VSTACK_RETURN_IF_ERROR(WriteHeaders(q, &image_, h));
  CountShared(kCounterHeaderWrites, 2);
  log_.emplace(image_, opened_file_size_);
  writing_.store(true, std::memory_order_release);
  return OkStatus();
}

void VhdxDevice::Allocate(IoQueue& q, std::span<Allocation* const> allocs) {
  std::unique_lock<std::mutex> lock(group_mu_);
  for (Allocation* a : allocs) {
    a->done = false;
    pending_.push_back(a);
  }
  auto all_done = [&] {
    return std::all_of(allocs.begin(), allocs.end(), [](Allocation* a) { return a->done; });
  };
  while (!all_done()) {
    if (committing_) {
      WaitUntil(group_cv_, lock, [&] { return !committing_; },
                "vhdx: another queue's group commit");
      continue;
    }
    // Lead: commit everything waiting, ours and other queues' alike.
    committing_ = true;
    std::vector<Allocation*> group;
    group.swap(pending_);
    lock.unlock();
    Status s;
    {
      std::lock_guard<IoMutex> commit(mu_);
      s = CommitGroup(q, group);
    }
    for (Allocation* a : group) {
      if (!s && !a->status) a->status = s.error().code;
    }
    lock.lock();
    for (Allocation* a : group) a->done = true;
    committing_ = false;
    group_cv_.notify_all();
  }
}

Status VhdxDevice::CommitGroup(IoQueue& q, std::span<Allocation* const> group) {
  const uint64_t bs = image_.layout.block_size;
  std::map<uint64_t, uint64_t> assigned;  // BAT index -> new entry
  std::map<uint64_t, uint64_t> tail_end;  // new space: BAT index -> end of its last write
  std::vector<IoRequest> writes(group.size());
  std::vector<IoRequest*> with;  // submitted with the log entry
  bool zero_filled = false;
  for (size_t i = 0; i < group.size(); ++i) {
    Allocation& a = *group[i];
    const uint64_t index = image_.layout.Index(a.block);
    auto it = assigned.find(index);
    const uint64_t e =
        it != assigned.end() ? it->second : bat_[index].load(std::memory_order_relaxed);
    IoRequest& w = writes[i];
    w.op = Op::kWrite;
    w.length = a.length;
    w.iov = a.iov.data();
    w.iovcnt = static_cast<uint32_t>(a.iov.size());
    if (EntryState(e) == kFullyPresent) {  // allocated meanwhile, or earlier in this group
      w.offset = EntryOffset(e) + a.in_block;
      with.push_back(&w);
      if (auto t = tail_end.find(index); t != tail_end.end()) {
        t->second = std::max(t->second, a.in_block + a.length);
      }
      continue;
    }
    const uint64_t old = EntryOffset(e);
    const bool reuse = (EntryState(e) == kZero || EntryState(e) == kUnmapped) && old != 0 &&
                       old >= image_.metadata_end && old + bs <= lower_device().size_bytes();
    uint64_t offset = old;
    if (!reuse) {
      offset = PastUnusable(image_, file_end_, bs);
      if (!growable_ && offset + bs > lower_device().size_bytes()) {
        a.status = Errc::kNoSpace;
        continue;
      }
      file_end_ = offset + bs;
    }
    w.offset = offset + a.in_block;
    assigned[index] = MakeEntry(kFullyPresent, offset);
    if (reuse || !growable_) {
      // The space may hold old bytes: the rest of the block must be zeros, durably, before the
      // BAT says the block is present.
      if (std::error_code ec = Execute(q, w)) return MakeError(ec, "vhdx: write failed");
      VSTACK_RETURN_IF_ERROR(ZeroAt(q, offset, a.in_block));
      VSTACK_RETURN_IF_ERROR(ZeroAt(q, offset + a.in_block + a.length, bs - a.in_block - a.length));
      zero_filled = true;
      CountShared(kCounterZeroFills);
    } else {
      // New space past the old end reads as zeros. The data goes down with the log entry: if
      // only the entry lands, the block reads as zeros, which an unfinished write may.
      with.push_back(&w);
      tail_end[index] = a.in_block + a.length;
    }
  }
  if (zero_filled) VSTACK_RETURN_IF_ERROR(FlushQueue(q));
  // New blocks at the end of a file: it grows once for the whole group, before any write to
  // them is submitted.
  if (growable_ && file_end_ > lower_device().size_bytes()) {
    VSTACK_RETURN_IF_ERROR(lower_device().Resize(file_end_));
  }
  // The file's new length must be carried by a write that the next flush makes durable (a
  // length set by truncation alone may not be, and readers refuse blocks that end past the
  // file; write-zeroes might not extend the file). The group's last new block ends the file, so
  // one write reaching its end carries the length for every block of the group: zeros from
  // the end of the group's own writes to that block (at most 4 KiB), so that no two requests
  // overlap, unless those writes reach the end already.
  AlignedBuffer zeros(kLogSector);
  IoRequest tail;
  iovec tail_iov{};
  const auto last = std::max_element(tail_end.begin(), tail_end.end(), [&](auto& a, auto& b) {
    return EntryOffset(assigned[a.first]) < EntryOffset(assigned[b.first]);
  });
  if (last != tail_end.end() && last->second < bs) {
    const uint64_t from = std::max(last->second, bs - kLogSector);
    tail_iov = {zeros.data(), bs - from};
    tail.op = Op::kWrite;
    tail.offset = EntryOffset(assigned[last->first]) + from;
    tail.length = bs - from;
    tail.iov = &tail_iov;
    tail.iovcnt = 1;
    with.push_back(&tail);
  }
  if (assigned.empty()) return RunAll(q, with);
  // Every changed BAT page, logged (with the data), then written in place.
  const uint64_t per_page = kLogSector / 8;
  std::vector<LogPage> pages;
  for (const auto& [index, value] : assigned) {
    const uint64_t first = index / per_page * per_page;
    if (!pages.empty() && pages.back().file_offset == image_.bat_region.offset + first * 8)
      continue;
    LogPage& page = pages.emplace_back();
    page.file_offset = image_.bat_region.offset + first * 8;
    for (uint64_t j = 0; j < per_page && first + j < image_.layout.entries; ++j) {
      auto a = assigned.find(first + j);
      const uint64_t v =
          a != assigned.end() ? a->second : bat_[first + j].load(std::memory_order_relaxed);
      StoreLE64(page.data.data() + 8 * j, OnDiskEntry(image_, first + j, v));
    }
  }
  const uint64_t last_file_offset = std::max(file_end_, lower_device().size_bytes());
  for (size_t done = 0; done < pages.size();) {
    const size_t n = std::min(pages.size() - done, log_->max_pages());
    VSTACK_ASSIGN_OR_RETURN(
        LogWriter::Written written,
        log_->Append(q, std::span<const LogPage>(pages).subspan(done, n), last_file_offset,
                     done == 0 ? with : std::vector<IoRequest*>{}));
    if (written.flushed) CountShared(kCounterLogFlushes);
    CountShared(kCounterLogEntries);
    CountShared(kCounterLogBytes, written.entry_bytes);
    done += n;
  }
  AlignedBuffer in_place(pages.size() * kLogSector);
  std::vector<IoRequest> page_writes(pages.size());
  std::vector<iovec> page_iov(pages.size());
  std::vector<IoRequest*> page_reqs;
  for (size_t i = 0; i < pages.size(); ++i) {
    std::memcpy(in_place.data() + i * kLogSector, pages[i].data.data(), kLogSector);
    page_iov[i] = {in_place.data() + i * kLogSector, kLogSector};
    page_writes[i].op = Op::kWrite;
    page_writes[i].offset = pages[i].file_offset;
    page_writes[i].length = kLogSector;
    page_writes[i].iov = &page_iov[i];
    page_writes[i].iovcnt = 1;
    page_reqs.push_back(&page_writes[i]);
  }
  VSTACK_RETURN_IF_ERROR(RunAll(q, page_reqs));
  CountShared(kCounterBatWrites, pages.size());
  for (const auto& [index, value] : assigned) bat_[index].store(value, std::memory_order_release);
  CountShared(kCounterAllocations, assigned.size());
  return OkStatus();
}

Status VhdxDevice::Flush(IoQueue& q) {
  uint64_t head = 0;
  {
    std::lock_guard<IoMutex> lock(mu_);
    if (log_) head = log_->head();
  }
  VSTACK_RETURN_IF_ERROR(FlushQueue(q));
  std::lock_guard<IoMutex> lock(mu_);
  if (log_) log_->Flushed(head);
  return OkStatus();
}

Status VhdxDevice::CloseLayer() {
  if (!writing_.load()) return OkStatus();
  SyncIo io(lower_device());
  IoQueue* q = io.queue();
  if (q == nullptr) return io.open_error();
  // Every in-place write is done: make them durable, then mark the log empty.
  VSTACK_RETURN_IF_ERROR(FlushQueue(*q));
  Header clean = image_.header;
  clean.log_guid = Guid{};
  VSTACK_RETURN_IF_ERROR(WriteHeaders(*q, &image_, clean));
  CountShared(kCounterHeaderWrites, 2);
  log_.reset();
  writing_.store(false);
  return OkStatus();
}

std::string VhdxDevice::Describe() const {
  return std::string("vhdx ") + (is_fixed() ? "fixed" : "dynamic") + ", " +
         FormatSize(geometry().size_bytes) + ", " + FormatSize(image_.layout.block_size) +
         " blocks, " + std::to_string(image_.metadata.logical_sector) + "-byte sectors";
}

void VhdxDevice::Properties(PropertyList& out) const {
  const Metadata& m = image_.metadata;
  const BatLayout& l = image_.layout;
  uint64_t states[8] = {};
  for (uint64_t b = 0; b < l.payload_blocks; ++b) ++states[EntryState(Entry(b))];
  out.push_back({"type", std::string(is_fixed() ? "fixed" : "dynamic"), ""});
  out.push_back({"virtual_size", m.virtual_size, "bytes"});
  out.push_back({"block_size", uint64_t{m.block_size}, "bytes"});
  out.push_back({"logical_sector_size", uint64_t{m.logical_sector}, "bytes"});
  out.push_back({"physical_sector_size", uint64_t{m.physical_sector}, "bytes"});
  out.push_back({"disk_id", m.page83.Text(), ""});
  out.push_back({"creator", image_.creator, ""});
  out.push_back({"header_sequence", image_.header.sequence, ""});
  out.push_back({"log_offset", image_.header.log_offset, ""});
  out.push_back({"log_size", uint64_t{image_.header.log_length}, "bytes"});
  out.push_back({"log_entries_replayed", image_.replayed_entries, ""});
  out.push_back({"bat_offset", image_.bat_region.offset, ""});
  out.push_back({"bat_entries", l.entries, ""});
  out.push_back({"chunk_ratio", l.chunk_ratio, ""});
  out.push_back({"metadata_offset", image_.metadata_region.offset, ""});
  out.push_back({"blocks", l.payload_blocks, ""});
  out.push_back({"blocks_fully_present", states[kFullyPresent], ""});
  out.push_back({"blocks_not_present", states[kNotPresent], ""});
  out.push_back({"blocks_zero", states[kZero], ""});
  out.push_back({"blocks_unmapped", states[kUnmapped], ""});
  out.push_back({"blocks_undefined", states[kUndefined], ""});
  out.push_back({"allocated_bytes", states[kFullyPresent] * l.block_size, "bytes"});
  out.push_back({"file_size", lower_device().size_bytes(), "bytes"});
}

Status VhdxDevice::MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  const uint64_t bs = image_.layout.block_size;
  for (uint64_t pos = offset; pos < offset + length;) {
    const uint64_t n = std::min(offset + length - pos, bs - pos % bs);
    const uint8_t state = EntryState(Entry(pos / bs));
    uint32_t flags = 0;
    if (state == kZero || state == kUnmapped) flags = kExtentZero;
    if (state == kNotPresent || state == kUndefined) flags = kExtentHole | kExtentZero;
    AppendExtent(out, pos, n, flags);
    pos += n;
  }
  return OkStatus();
}

Status VhdxDevice::Check(CheckMode mode, CheckResult* out) {
  for (const std::string& p : image_.problems) out->Corruption("vhdx: " + p);
  if (image_.replayed_entries > 0) {
    out->messages.push_back("Repaired: vhdx: replayed " +
                            Counted(image_.replayed_entries, "log entry", "log entries"));
    ++out->repaired;
  }
  if (image_.length_unsettled) {
    out->messages.push_back("vhdx: the log stays: no space for the write that makes the grown "
                            "file's length durable; it is replayed again at the next open");
  }
  // Blocks that overlap each other.
  const BatLayout& l = image_.layout;
  std::vector<std::pair<uint64_t, uint64_t>> blocks;  // offset, block
  for (uint64_t b = 0; b < l.payload_blocks; ++b) {
    const uint64_t e = Entry(b);
    if (EntryState(e) == kFullyPresent) blocks.push_back({EntryOffset(e), b});
  }
  std::sort(blocks.begin(), blocks.end());
  for (size_t i = 1; i < blocks.size(); ++i) {
    if (blocks[i].first < blocks[i - 1].first + l.block_size) {
      out->Corruption("vhdx: blocks " + std::to_string(blocks[i - 1].second) + " and " +
                      std::to_string(blocks[i].second) + " overlap at file offset " +
                      std::to_string(blocks[i].first));
    }
  }
  return OkStatus();
}

}  // namespace vstack::vhdx
