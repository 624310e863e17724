// The state of one operation of a GrainQueue (a caller's request), of its grains (slots) and of
// its requests below: private to the queue, shared by its two files (grain_queue.cc: the loop,
// writes, requests below; grain_read.cc: reads and the reads of read-modify-write).
#ifndef VSTACK_BLOCKDEV_GRAINMAP_GRAIN_QUEUE_OP_H_
#define VSTACK_BLOCKDEV_GRAINMAP_GRAIN_QUEUE_OP_H_

#include <cstdint>
#include <system_error>
#include <vector>

#include "blockdev/grainmap/grain_queue.h"

namespace vstack {

using IoOp = ::vstack::Op;

struct GrainQueue::Slot {
  uint64_t v = 0;
  uint32_t in_off = 0, len = 0;  // the caller's part of the grain
  uint64_t rel = 0;              // where that part is in the caller's iovecs
  uint64_t entry = 0;            // the entry read
  Encoded enc;
  AlignedBuffer* buf = nullptr;      // the grain's content: merged, or gathered
  AlignedBuffer* scratch = nullptr;  // encoded bytes; kConfirm: the candidate's bytes
  Op* op = nullptr;
};

struct GrainQueue::Op {
  IoRequest* parent = nullptr;
  Stage stage = Stage::kRead;
  uint64_t first = 0, count = 0;
  uint64_t gen = 0;  // the read generation it entered (UnitMap::Enter)
  std::vector<Slot> slots;
  uint32_t pending = 0;
  std::error_code error;
  bool write = false, zeroes = false, unmap = false;
  bool locked = false, bad_read = false;
  uint8_t room_tries = 0;  // commits made to find room for it (GrainQueue::WriteDone)
  bool no_unit = false;  // this layer had no free unit (not: the device below is full)
};

struct GrainQueue::Lower {
  GrainQueue* q = nullptr;
  Op* op = nullptr;  // null: the layer's own I/O, reported to done(ctx)
  IoRequest req;
  std::vector<iovec> iov;
  AlignedBuffer* bounce = nullptr;
  uint32_t first_slot = 0, slots = 0;  // reads: the slots it holds the bytes of
  GrainIo::Done done = nullptr;
  void* ctx = nullptr;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_GRAINMAP_GRAIN_QUEUE_OP_H_
