#include "blockdev/zstd/packing_queue.h"

#include <algorithm>
#include <cstring>

namespace vstack {

PackingQueue::PackingQueue(ZstdDevice& dev, GrainIo& io)
    : io_(io),
      grain_(dev.grain()),
      block_(dev.lower_device().geometry().logical_block),
      compressor_(dev.level()),
      packer_(grain_, dev.open_bins(), kMaxHoles, ApplySizeRule(dev.rule(), grain_, 1).slot) {}

PackingQueue::~PackingQueue() {
  for (Bin* b : packer_.TakeActive()) Seal(b, grain_ - b->fill);
  GiveUpHoles();
}

void PackingQueue::GiveUpHoles() {
  for (const Hole& h : packer_.TakeHoles()) SealHole(h);
}

void PackingQueue::Pack(void* grain, const std::byte* bytes, uint32_t length, uint32_t slot) {
  const Packer::Choice c = packer_.Choose(slot);
  Bin* b = c.active;
  if (c.kind == Packer::Choice::kHole) {
    b = Activate(c.hole.bin, grain_ - c.hole.free);
  } else if (c.kind == Packer::Choice::kNew) {
    uint64_t bin;
    if (!io_.TakeUnit(&bin)) {
      GiveUpHoles();  // their bins may hold nothing live any more: a commit frees them
      return io_.Packed(grain, 0, Errc::kNoSpace);
    }
    io_.Hold(bin);
    b = Activate(static_cast<uint32_t>(bin), 0);
  }
  bool full = false;
  const uint32_t offset = packer_.Place(b, slot, &full);
  std::byte* at = b->image.data() + offset;
  std::memcpy(at, bytes, length);
  // What goes below past the fragment reads as zeros: the rest of its slot and of the lower
  // block it ends in. (An activated bin's image is not cleared: only these bytes, the
  // fragments' and a tail read's ever go below.)
  const uint32_t padded = std::max(offset + slot, std::min(AlignUp(offset + length), grain_));
  std::memset(at + length, 0, padded - offset - length);
  b->fill = offset + slot;
  b->waiting.push_back({grain, FragmentEntry(b->bin, offset, length)});
  if (!b->writing) WriteBin(b);
  if (full) Seal(b, grain_ - b->fill);
}

PackingQueue::Bin* PackingQueue::Activate(uint32_t bin, uint32_t fill) {
  uint32_t free = 0;
  if (std::optional<Bin*> fullest = packer_.MakeRoom(&free)) Retire(*fullest);
  Bin* b = bins_.Get();
  b->q = this;
  b->bin = bin;
  b->fill = fill;
  b->closed = b->to_hole = b->writing = false;
  if (b->image.size() != grain_) {
    b->image = AlignedBuffer(grain_);
    b->wbuf = AlignedBuffer(grain_);
  }
  packer_.Activate(b, grain_ - fill);
  const uint32_t lo = AlignDown(fill);
  if (lo == fill) return b;
  // The lower block the free space starts in holds earlier fragments: its next write must
  // carry them again, so read it back first; fragments placed meanwhile wait.
  io_.Count(ZstdDevice::kTailReads);
  b->writing = true;
  b->tail = lo;
  b->tail_end = fill;
  io_.Issue(Op::kRead, uint64_t{bin} * grain_ + lo, b->wbuf.data(), block_, &OnTailRead, b);
  return b;
}

// Writes the lower blocks of `b` that hold its waiting fragments, from a copy of the image.
void PackingQueue::WriteBin(Bin* b) {
  const Location first = FragmentOf(b->waiting.front().entry);
  const Location last = FragmentOf(b->waiting.back().entry);
  const uint32_t lo = AlignDown(first.offset), hi = AlignUp(last.offset + last.length);
  std::memcpy(b->wbuf.data(), b->image.data() + lo, hi - lo);
  b->in_write.swap(b->waiting);
  b->waiting.clear();
  b->writing = true;
  io_.Issue(Op::kWrite, uint64_t{b->bin} * grain_ + lo, b->wbuf.data(), hi - lo, &OnWritten, b);
}

void PackingQueue::Seal(Bin* b, uint32_t free) {
  io_.Count(ZstdDevice::kSealedBins);
  io_.Count(ZstdDevice::kSealedFreeBytes, free);
  b->closed = true;
  if (!b->writing && b->waiting.empty()) Settle(b);  // else once its I/O is done
}

void PackingQueue::SealHole(const Hole& h) {
  io_.Count(ZstdDevice::kSealedBins);
  io_.Count(ZstdDevice::kSealedFreeBytes, h.free);
  io_.Unhold(h.bin);
}

void PackingQueue::Retire(Bin* b) {
  b->closed = b->to_hole = true;
  if (!b->writing && b->waiting.empty()) Settle(b);  // else once its I/O is done
}

void PackingQueue::Settle(Bin* b) {
  if (!b->waiting.empty()) return WriteBin(b);
  if (!b->closed) return;
  if (!b->to_hole) {
    io_.Unhold(b->bin);
  } else if (std::optional<Hole> sealed = packer_.Retire(b->bin, grain_ - b->fill)) {
    SealHole(*sealed);
  }
  bins_.Put(b);
}

void PackingQueue::OnWritten(void* ctx, std::error_code status) {
  Bin* b = static_cast<Bin*>(ctx);
  PackingQueue* q = b->q;
  std::vector<Placed> done;
  done.swap(b->in_write);
  // Reporting may pack more (re-entrantly): until all are reported, `b` stays busy, so what
  // is placed in it waits and `b` is not retired or sealed under us. A failed write leaves its
  // fragments' space unused.
  for (const Placed& p : done) q->io_.Packed(p.grain, p.entry, status);
  done.clear();
  b->in_write.swap(done);  // keep the capacity
  b->writing = false;
  q->Settle(b);
}

void PackingQueue::OnTailRead(void* ctx, std::error_code status) {
  Bin* b = static_cast<Bin*>(ctx);
  PackingQueue* q = b->q;
  b->writing = false;
  if (!status) {
    std::memcpy(b->image.data() + b->tail, b->wbuf.data(), b->tail_end - b->tail);
    return q->Settle(b);
  }
  // The bin cannot be added to: the fragments placed in it fail, and it is sealed.
  std::vector<Placed> failed;
  failed.swap(b->waiting);
  if (!b->closed) q->packer_.Remove(b);
  if (!b->closed || b->to_hole) {
    q->io_.Count(ZstdDevice::kSealedBins);
    q->io_.Count(ZstdDevice::kSealedFreeBytes, q->grain_ - b->fill);
  }
  b->closed = true;
  b->to_hole = false;
  q->Settle(b);
  for (const Placed& p : failed) q->io_.Packed(p.grain, 0, status);
}

}  // namespace vstack
