// The VHDX device (vhdx_device.h): open, its queue (reads and writes of present blocks, the
// hand-off of first writes to allocation), properties, extents and check. The write path's
// allocation and group commit are in vhdx_commit.cc.
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
      growable_(lower_device().Has(kCapResizable)),
      opened_file_size_(image_.file_size) {
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
  image_.bat.ForEachNonZero([&](uint64_t i, uint64_t e) {
    if (EntryOffset(e) != 0 && EntryState(e) != kUnusableState) {
      end = std::max(
          end, EntryOffset(e) +
                   (image_.layout.IsBitmapIndex(i) ? kMiB : uint64_t{image_.layout.block_size}));
    }
  });
  file_end_ = AlignUp(end, kMiB);
}

VhdxDevice::~VhdxDevice() = default;

Result<std::unique_ptr<IoQueue>> VhdxDevice::DoOpenQueue() {
  VSTACK_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> lower, lower_device().OpenQueue());
  return std::unique_ptr<IoQueue>(new VhdxQueue(*this, std::move(lower)));
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
  // Payload entries that are 0 sit in absent pages mostly: they are counted as the rest.
  uint64_t states[8] = {};
  uint64_t seen = 0;
  image_.bat.ForEachNonZero([&](uint64_t index, uint64_t e) {
    if (l.IsBitmapIndex(index)) return;
    ++states[EntryState(e)];
    ++seen;
  });
  states[kNotPresent] += l.payload_blocks - seen;
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
  out.push_back({"bat_pages_resident", image_.bat.resident_pages(), ""});
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

UnwrittenOrigin VhdxDevice::OriginOfUnwritten(uint64_t offset) const {
  const uint64_t bs = image_.layout.block_size;
  const uint64_t n = std::min(size_bytes() - offset, bs - offset % bs);
  const uint64_t entry = Entry(offset / bs);
  if (EntryState(entry) == kUnusableState) return {};
  if (!Readable(EntryState(entry))) return UnwrittenOrigin::Zeros(n);
  // Past the file's end, as reads see it (MapExtents), zeros.
  const uint64_t at = EntryOffset(entry) + offset % bs;
  const uint64_t file = lower_device().size_bytes();
  if (at >= file) return UnwrittenOrigin::Zeros(n);
  return UnwrittenOrigin::Of(lower_device(), at, std::min(n, file - at));
}

Status VhdxDevice::MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  const BatLayout& l = image_.layout;
  const uint64_t bs = l.block_size;
  for (uint64_t pos = offset; pos < offset + length;) {
    const uint64_t index = l.Index(pos / bs);
    const uint64_t page = index / BatTable::kEntriesPerPage;
    if (!image_.bat.PageResident(page)) {
      // Every block of an absent BAT page is NOT_PRESENT: skipped as one hole, up to the first
      // block of the next page.
      const uint64_t next = (page + 1) * BatTable::kEntriesPerPage;
      const uint64_t end = std::min(offset + length, (next - next / (l.chunk_ratio + 1)) * bs);
      AppendExtent(out, pos, end - pos, kExtentHole | kExtentZero);
      pos = end;
      continue;
    }
    const uint64_t n = std::min(offset + length - pos, bs - pos % bs);
    const uint64_t entry = image_.bat.Get(index);
    if (EntryState(entry) == kFullyPresent) {
      // What the file holds there: the part of a block that is a hole in the file (a fixed
      // VHDX made sparse, a block allocated and never written) holds no data, as for a fixed
      // VHD; past the file's end, as reads see it, zeros.
      const uint64_t at = EntryOffset(entry) + pos % bs;
      const uint64_t file = lower_device().size_bytes();
      const uint64_t in_file = at < file ? std::min(n, file - at) : 0;
      std::vector<Extent> below;
      if (in_file > 0) VSTACK_RETURN_IF_ERROR(lower_device().MapExtents(at, in_file, &below));
      for (const Extent& e : below) AppendExtent(out, pos + (e.offset - at), e.length, e.flags);
      if (in_file < n) AppendExtent(out, pos + in_file, n - in_file, kExtentHole | kExtentZero);
    } else {
      // ZERO and UNMAPPED blocks read as zeros and hold nothing in the file (qemu-img creates
      // every block ZERO; a guest's unmap leaves one UNMAPPED): not allocated here, as
      // NOT_PRESENT (qemu-img map reports all three as "data": false).
      AppendExtent(out, pos, n, kExtentHole | kExtentZero);
    }
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
  if (image_.log_kept) {
    out->messages.push_back("vhdx: the log stays: no space below to write it in place; it is "
                            "replayed again before the first write or at the next open");
  }
  // Blocks that overlap each other.
  const BatLayout& l = image_.layout;
  std::vector<std::pair<uint64_t, uint64_t>> blocks;  // offset, block
  image_.bat.ForEachNonZero([&](uint64_t index, uint64_t e) {
    if (l.IsBitmapIndex(index) || EntryState(e) != kFullyPresent) return;
    blocks.push_back({EntryOffset(e), index - index / (l.chunk_ratio + 1)});
  });
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
