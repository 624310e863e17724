#include "blockdev/metastore/grain_queue.h"

namespace vstack {

bool GrainQueue::RejectSlowFastZero(IoRequest* parent, uint64_t grain) {
  if (parent->op != Op::kWriteZeroes || !(parent->flags & kIoFastZero) ||
      (parent->offset % grain == 0 && parent->length % grain == 0)) {
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

}  // namespace vstack
