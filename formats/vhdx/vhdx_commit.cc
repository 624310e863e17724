// VHDX's write path on the device (vhdx_device.h): the first write's header update, block
// allocation, the group commit of new BAT entries through the log, and flush.
#include <algorithm>
#include <array>
#include <cstring>
#include <map>

#include "formats/vhdx/vhdx_device.h"
#include "formats/vhdx/vhdx_io.h"
#include "formats/vhdx/vhdx_log.h"
#include "lib/aligned_buffer.h"
#include "lib/endian.h"
#include "lib/iovec.h"
#include "lib/sync_io.h"

namespace vstack::vhdx {

Status VhdxDevice::BeginWrites(IoQueue& q) {
  if (writing_.load(std::memory_order_acquire)) return OkStatus();
  auto lock = LockQuiesced(mu_, q);
  if (writing_.load(std::memory_order_relaxed)) return OkStatus();
  VSTACK_RETURN_IF_ERROR(SettleLog(lower_device(), q, &image_));
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
      // Another queue's commit may need what this queue has in flight below (a lock it holds
      // in a layer there): let it finish before waiting (the progress rule).
      if (q.in_flight() > 0) {
        lock.unlock();
        q.WaitIdle();
        lock.lock();
        continue;
      }
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
      auto commit = LockQuiesced(mu_, q);
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
        it != assigned.end() ? it->second : image_.bat.Get(index, std::memory_order_relaxed);
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
          a != assigned.end() ? a->second : image_.bat.Get(first + j, std::memory_order_relaxed);
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
  for (const auto& [index, value] : assigned) image_.bat.Set(index, value);
  CountShared(kCounterAllocations, assigned.size());
  return OkStatus();
}

Status VhdxDevice::Flush(IoQueue& q) {
  uint64_t head = 0;
  {
    auto lock = LockQuiesced(mu_, q);
    if (log_) head = log_->head();
  }
  VSTACK_RETURN_IF_ERROR(FlushQueue(q));
  auto lock = LockQuiesced(mu_, q);
  if (log_) log_->Flushed(head);
  return OkStatus();
}

}  // namespace vstack::vhdx
