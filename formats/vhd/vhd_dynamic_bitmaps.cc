// The dynamic VHD queue's sector bitmaps (vhd_dynamic_queue.h): a piece that needs a block's
// bitmap waits for its read; a write's bitmap update is written back once, with the updates that
// queued behind it, after the data it describes.
#include <algorithm>
#include <cstring>

#include "formats/vhd/vhd_bitmap.h"
#include "formats/vhd/vhd_device.h"
#include "formats/vhd/vhd_dynamic_queue.h"
#include "lib/cpu_tag.h"
#include "lib/iovec.h"

namespace vstack::vhd {

bool DynamicQueue::WaitForBitmap(BitmapState& bs, Piece* p, std::vector<uint8_t>* snapshot) {
  if (bs.writing && AllSet(bs.inflight.data(), p->first, p->count)) {
    bs.wait_write.push_back(p);
    return false;
  }
  bs.wait_next.push_back(p);
  if (bs.writing) return false;
  bs.writing = true;
  bs.inflight = bs.mem;
  bs.wait_write.swap(bs.wait_next);
  *snapshot = bs.inflight;
  return true;
}

void DynamicQueue::ResumeBitmapWait(Piece* p) {
  std::unique_lock lock(st_.mu);
  auto it = st_.bitmaps.find(p->block);
  if (it == st_.bitmaps.end() || AllSet(it->second->disk.data(), p->first, p->count)) {
    lock.unlock();  // the block became full: its bits are on disk
    Finish(p->req, {});
    return;
  }
  // Its data is written. A bitmap write that failed while it was between two waits (handed
  // back to its queue, in no wait list) may have cleared its bits in memory with the failed
  // writes' (ForgetFailedBits keeps only those of waiting pieces): they are set again, or the
  // next bitmap write would leave them out and the write would succeed without them.
  SetBits(it->second->mem.data(), p->first, p->count);
  std::vector<uint8_t> snapshot;
  const bool start = WaitForBitmap(*it->second, p, &snapshot);
  const bool flush = !it->second->clear_zero;
  lock.unlock();
  if (start) IssueBitmapWrite(p->block, st_.bat.entry(p->block), snapshot, flush);
}

void DynamicQueue::IssueBitmapRead(uint32_t block, uint32_t entry) {
  LowerOp* op = NewOp(Kind::kBitmapRead);
  op->block = block;
  SetPayload(op, Op::kRead, uint64_t{entry} * kSectorSize, nullptr, st_.bitmap_bytes);
  Count(kCounterBitmapReads);
  Issue(op);
}

void DynamicQueue::IssueBitmapWrite(uint32_t block, uint32_t entry,
                                    const std::vector<uint8_t>& bits, bool after_flush) {
  internal::PhaseScope metadata(device(), CpuPhase::kMetadata);
  LowerOp* op = NewOp(Kind::kBitmapWrite);
  op->block = block;
  SetPayload(op, Op::kWrite, uint64_t{entry} * kSectorSize, bits.data(), st_.bitmap_bytes);
  Count(kCounterBitmapWrites);
  if (!after_flush) {
    Issue(op);
    return;
  }
  LowerOp* flush = NewOp(Kind::kBitmapFlush);
  flush->req.op = Op::kFlush;
  flush->next = op;
  Count(kCounterMetaFlushes);
  Issue(flush);
}

void DynamicQueue::OnBitmapRead(LowerOp* op, std::error_code ec) {
  std::vector<Piece*> waiters;
  {
    std::lock_guard lock(st_.mu);
    auto it = st_.bitmaps.find(op->block);
    BitmapState& bs = *it->second;
    bs.loading = false;
    waiters.swap(bs.wait_load);
    if (!ec) {
      const auto* p = reinterpret_cast<const uint8_t*>(op->buf.data());
      bs.mem.assign(p, p + st_.bitmap_bytes);
      if (auto cut = st_.cut_blocks.find(op->block); cut != st_.cut_blocks.end()) {
        for (uint32_t s = cut->second; s < st_.sectors_per_block; ++s) {
          bs.mem[s >> 3] &= static_cast<uint8_t>(~(0x80u >> (s & 7)));  // past the end
        }
      }
      bs.disk = bs.mem;
      bs.loaded = true;
      if (AllSet(bs.disk.data(), 0, st_.sectors_per_block)) {
        st_.bat.SetFlags(op->block, Bat::kFull);
        st_.bitmaps.erase(it);
      }
    } else {
      st_.bitmaps.erase(it);  // the next access tries again
    }
  }
  for (Piece* p : waiters) {
    if (ec) {
      Finish(p->req, ec);
    } else {
      Redo(p, Action::kTranslate);
    }
  }
}

// A bitmap write failed: its writes fail, and their bits that are not on disk are cleared in
// memory, so their sectors read as before (old contents) now and after a reopen; left set,
// reads would show the new data until the close and the old after it, although a flush came
// between (a layer above that recomputes checksums from what it reads would then store ones
// the reopened disk contradicts). Bits another pending write needs (`retry`) stay. The failed
// data may lie in clear sectors now: the block's clear sectors are no longer known zeros.
void DynamicQueue::ForgetFailedBits(BitmapState& bs, const std::vector<Piece*>& failed,
                                    const std::vector<Piece*>& retry) {
  std::vector<uint8_t> keep = bs.disk;
  for (const Piece* p : retry) SetBits(keep.data(), p->first, p->count);
  for (const Piece* p : failed) {
    for (uint32_t s = p->first; s < p->first + p->count; ++s) {
      if (!TestBit(keep.data(), s)) bs.mem[s >> 3] &= static_cast<uint8_t>(~(0x80u >> (s & 7)));
    }
  }
  bs.clear_zero = false;
}

void DynamicQueue::OnBitmapWrite(LowerOp* op, std::error_code ec) {
  std::vector<Piece*> done, retry;
  std::vector<uint8_t> snapshot;
  bool start = false, flush = true;
  {
    std::lock_guard lock(st_.mu);
    auto it = st_.bitmaps.find(op->block);
    BitmapState& bs = *it->second;
    bs.writing = false;
    if (!ec) bs.disk = bs.inflight;
    done.swap(bs.wait_write);
    for (Piece* p : bs.wait_next) {
      (!ec && AllSet(bs.disk.data(), p->first, p->count) ? done : retry).push_back(p);
    }
    bs.wait_next.clear();
    if (ec) ForgetFailedBits(bs, done, retry);
    flush = !bs.clear_zero;
    const bool mine =
        std::any_of(retry.begin(), retry.end(), [&](Piece* p) { return p->req->owner == this; });
    if (mine) {  // this queue keeps polling for its own piece: it writes the next copy
      start = true;
      bs.writing = true;
      bs.inflight = bs.mem;
      bs.wait_write.swap(retry);
      snapshot = bs.inflight;
    }
    if (!ec && !bs.writing && bs.wait_load.empty() &&
        AllSet(bs.disk.data(), 0, st_.sectors_per_block)) {
      st_.bat.SetFlags(op->block, Bat::kFull);
      st_.bitmaps.erase(it);
    }
  }
  for (Piece* p : done) Finish(p->req, ec);
  if (start) IssueBitmapWrite(op->block, st_.bat.entry(op->block), snapshot, flush);
  for (Piece* p : retry) Redo(p, Action::kBitmapWait);
}

}  // namespace vstack::vhd
