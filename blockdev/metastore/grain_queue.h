// GrainQueue: the request loop the grain layers (dedup, zstd, crc32c) share. A flush commits
// the layer's metadata and completes when that commit has; every other request is started by
// the layer (StartRead, StartWrite), which appends the lower requests it needs to `out`; all of
// a batch's lower requests go down in one Submit. A completion callback may submit again (the
// loop reuses one scratch vector and is re-entrant).
#ifndef VSTACK_BLOCKDEV_METASTORE_GRAIN_QUEUE_H_
#define VSTACK_BLOCKDEV_METASTORE_GRAIN_QUEUE_H_

#include <memory>
#include <span>
#include <vector>

#include "lib/layer.h"

namespace vstack {

class GrainQueue : public LayerQueue {
 public:
  GrainQueue(BlockDevice& owner, std::unique_ptr<IoQueue> lower)
      : LayerQueue(owner, std::move(lower)) {}

 protected:
  // Called once per batch, before any request of it starts (e.g. to commit when enough
  // metadata is pending).
  virtual void BeforeBatch() {}
  // Makes every completed write's metadata durable (the flush).
  virtual Status CommitForFlush() = 0;
  virtual void StartRead(IoRequest* parent, std::vector<IoRequest*>& out) = 0;
  // kWrite, kWriteZeroes and kDiscard.
  virtual void StartWrite(IoRequest* parent, std::vector<IoRequest*>& out) = 0;

  // Completes a write-zeroes that asks to be fast but covers part of a grain (a
  // read-modify-write is not fast) with kNotSupported, and returns true; else false.
  bool RejectSlowFastZero(IoRequest* parent, uint64_t grain);
  void SubmitLower(std::vector<IoRequest*>& out) {
    if (!out.empty()) lower().Submit(out);
  }

  void DoSubmit(std::span<IoRequest* const> batch) final;

 private:
  std::vector<IoRequest*> scratch_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_GRAIN_QUEUE_H_
