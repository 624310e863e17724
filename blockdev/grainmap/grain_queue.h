// GrainQueue: the queue of every grain layer (grain_device.h). A layer never sees it: it is
// the engine's data path, driving the layer's hooks once per grain.
//
// A caller's request is one operation (Op) with a slot per grain it touches:
//   read:   each grain's entry is looked up (inside the read generation, unit_map.h); grains
//           whose bytes lie next to each other below are read with one request (into the
//           caller's buffers when they are whole raw grains and the buffers suit the device
//           below, else into a bounce buffer, then decoded or copied); zero and unmapped grains
//           are zero-filled. A grain that fails VerifyRead makes the read start over once
//           holding its grains' locks.
//   write, write-zeroes, discard:
//           lock the grains (or park) -> read the partial grains and merge them (read-modify-
//           write) -> Encode each grain -> store: the grains stored whole on consecutive units go
//           below as one request, packed ones through the layer's Pack -> remap them all under
//           the queue's journal mutex -> unlock, complete.
// Flush commits (GrainDevice::Commit); so does a batch when enough records are pending. Out of
// space (no free unit, or ENOSPC below): undo the encodes, commit (which frees what was
// released, and discards below what is free), and try once more.
// Operations, requests below and buffers are pooled: nothing is allocated per request once
// warm. Before blocking (a commit) the queue waits until nothing it sent below is in flight
// (Quiesce), as the progress rule of lib/block_device.h asks.
#ifndef VSTACK_BLOCKDEV_GRAINMAP_GRAIN_QUEUE_H_
#define VSTACK_BLOCKDEV_GRAINMAP_GRAIN_QUEUE_H_

#include <memory>
#include <vector>

#include "blockdev/grainmap/grain_device.h"
#include "blockdev/metastore/grain_io.h"
#include "lib/historical_bug.h"
#include "lib/layer.h"

namespace vstack {

class GrainQueue final : public LayerQueue, public GrainIo {
 public:
  GrainQueue(GrainDevice& dev, std::unique_ptr<IoQueue> lower);
  ~GrainQueue() override;

  // GrainIo.
  void Issue(Op op, uint64_t offset, std::byte* buf, uint32_t length, Done done,
             void* ctx) override;
  void Packed(void* grain, uint64_t entry, std::error_code status) override;
  void Hold(uint64_t unit) override;
  void Unhold(uint64_t unit) override;
  bool TakeUnit(uint64_t* unit) override { return map_.TakeUnit(*journal_, unit); }
  // (HistoricalBug::kCommitWithoutQuiesce skips the wait, for the simulator's test.)
  void Quiesce() override {
    if (!Reintroduced(HistoricalBug::kCommitWithoutQuiesce)) lower().WaitIdle();
  }
  void Count(size_t counter, uint64_t n = 1) override { IoQueue::Count(counter, n); }

 private:
  struct Slot;
  struct Op;
  struct Lower;
  // Commits a write out of room may make: the first always, more while the layer holds units
  // nothing references (MayFindRoom), which other queues' writes keep changing.
  static constexpr uint8_t kMaxRoomTries = 16;
  enum class Stage : uint8_t { kRead, kLock, kRmw, kEncode, kStore };

  void DoSubmit(std::span<IoRequest* const> batch) override;
  void DoPoll(bool wait) override;

  Op* NewOp(IoRequest* parent);
  void Park(Op* op, Stage stage);
  void Resume(Op* op);
  // One piece of `op` (a request below, a packed grain) is done; after the last, the next stage.
  void Piece(Op* op, std::error_code status);
  void Next(Op* op);
  // Reads the op's grains into the caller's buffers, or (kRmw) its partial grains into their
  // slots' buffers.
  void Read(Op* op, Stage stage);
  void Deliver(Lower* l);
  void ReadDone(Op* op);
  void Merge(Op* op);
  void EncodeAll(Op* op);
  void StoreAll(Op* op);
  void WriteDone(Op* op);
  // Whether another commit may find room for `op`, out of room (kMaxRoomTries).
  bool MayFindRoom(const Op& op) const;
  // Gives back what Encode took (units, references) for the first `slots` slots.
  void Undo(Op* op, size_t slots);
  void Finish(Op* op, std::error_code status);
  // The bytes of slot s's grain to encode: its buffer, or the caller's when contiguous.
  std::byte* GrainBytes(Op* op, Slot& s);
  // Where s's bytes are below: [*at, *at + length), raw (the grain itself) or not.
  Location Where(const Slot& s, uint64_t* at) const;

  Lower* NewLower(Op* op, ::vstack::Op kind, uint64_t offset);
  void Send();
  static void OnLower(IoRequest& r);

  GrainDevice& dev_;
  UnitMap& map_;
  UnitMap::Journal* const journal_;
  std::unique_ptr<GrainDevice::QueueState> state_;
  const uint32_t grain_;
  const uint32_t grain_shift_;  // log2(grain_): grains are powers of two (ValidGrain)
  const uint32_t block_;        // logical block below: reads and writes are aligned to it
  const uint64_t lower_align_;  // memory alignment below
  const bool in_place_;
  const bool encodes_to_scratch_;  // GrainDevice::EncodesToScratch
  RequestPool<Op> ops_;
  RequestPool<Lower> lowers_;
  BufferPool buffers_;
  std::vector<Op*> parked_, retry_;
  uint8_t room_wait_ = 0;  // the most commits a write parked for room has made (DoPoll)
  std::vector<IoRequest*> out_, sending_;
  std::vector<void*> pack_grains_;  // StoreAll's arguments to Pack, reused
  std::vector<const std::byte*> pack_bytes_;
  std::vector<Encoded> pack_encoded_;
  bool in_send_ = false;
  bool commit_due_ = false;
  bool need_commit_ = false;
  GrainDevice::CommitKind commit_kind_ = GrainDevice::CommitKind::kDue;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_GRAINMAP_GRAIN_QUEUE_H_
