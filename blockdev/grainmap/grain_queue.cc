#include "blockdev/grainmap/grain_queue.h"

#include "lib/iovec.h"

namespace vstack {

GrainQueue::GrainQueue(BlockDevice& owner, std::unique_ptr<IoQueue> lower, uint32_t grain,
                       size_t retries_counter)
    : LayerQueue(owner, std::move(lower)),
      grain_(grain),
      lower_align_(this->lower().device().geometry().mem_alignment),
      align_(std::max<uint64_t>(4096, lower_align_)),
      buffers_(grain_, align_),
      retries_counter_(retries_counter) {}

bool GrainQueue::RejectSlowFastZero(IoRequest* parent) {
  if (parent->op != Op::kWriteZeroes || !(parent->flags & kIoFastZero) ||
      (parent->offset % grain_ == 0 && parent->length % grain_ == 0)) {
    return false;
  }
  Complete(*parent, Errc::kNotSupported);
  return true;
}

void GrainQueue::DoSubmit(std::span<IoRequest* const> batch) {
  BeforeBatch();
  std::vector<IoRequest*> out;
  out.swap(scratch_);  // reuse its capacity; a callback may enter DoSubmit again
  for (IoRequest* parent : batch) {
    switch (parent->op) {
      case Op::kFlush: {
        QuiesceBelow();
        Status s = CommitForFlush();
        Complete(*parent, s ? std::error_code() : s.error().code);
        break;
      }
      case Op::kRead:
        StartRead(parent, out);
        break;
      case Op::kWrite:
      case Op::kWriteZeroes:
      case Op::kDiscard:
        StartWrite(parent, out);
        break;
    }
  }
  SubmitLower(out);
  out.clear();
  if (out.capacity() > scratch_.capacity()) scratch_.swap(out);
}

void GrainQueue::DoPoll(bool wait) {
  if (need_commit_) {
    const bool room = make_room_;
    need_commit_ = make_room_ = false;
    QuiesceBelow();
    // Frees units released before it; failures surface as kNoSpace.
    (void)(room ? CommitToMakeRoom() : CommitForFlush());
  }
  if (!parked_.empty()) {
    std::vector<Waiter*> retry;
    retry.swap(parked_);
    std::vector<IoRequest*> out;
    for (Waiter* w : retry) {
      if (retries_counter_ != kNoCounter) Count(retries_counter_);
      Retry(w, out);
    }
    SubmitLower(out);
  }
  LayerQueue::DoPoll(wait);
}

GrainQueue::ReadRun* GrainQueue::NewRun(PendingParent* ctx, uint64_t first_unit, uint64_t offset,
                                        uint64_t iov_off, void (*on_complete)(IoRequest&)) {
  ReadRun* run = runs_.Get();
  run->q = this;
  run->ctx = ctx;
  run->first_unit = first_unit;
  run->units = 1;
  run->iov_off = iov_off;
  run->length = 0;
  run->bounce = nullptr;
  run->iov.clear();
  run->lower = IoRequest{};
  run->lower.op = Op::kRead;
  run->lower.offset = offset;
  run->lower.on_complete = on_complete;
  run->lower.user_data = run;
  return run;
}

void GrainQueue::IssueRun(ReadRun* run, std::vector<IoRequest*>& out) {
  const IoRequest* parent = run->ctx->parent();
  run->lower.length = run->length;
  if (SliceAligned(parent->iov, parent->iovcnt, run->iov_off, run->length, lower_align_)) {
    IovSlice(parent->iov, parent->iovcnt, run->iov_off, run->length, &run->iov);
  } else {
    run->bounce = new AlignedBuffer(run->length, align_);
    run->iov.push_back(run->bounce->iov());
  }
  run->lower.iov = run->iov.data();
  run->lower.iovcnt = static_cast<uint32_t>(run->iov.size());
  run->ctx->Add();
  out.push_back(&run->lower);
}

void GrainQueue::FinishRun(ReadRun* run, std::error_code status) {
  if (run->bounce) {
    if (!status) {
      const IoRequest* parent = run->ctx->parent();
      CopyToIov(parent->iov, parent->iovcnt, run->iov_off, run->bounce->data(), run->length);
    }
    delete run->bounce;
    run->bounce = nullptr;
  }
  PendingParent* ctx = run->ctx;
  runs_.Put(run);
  FinishParent(ctx, status);
}

}  // namespace vstack
