// The queue of a dynamic VHD and the state it shares with other queues' requests (internal to
// formats/vhd). The queue's work is split in three files: vhd_dynamic_queue.cc (requests,
// translation, hand-offs between queues), vhd_dynamic_bitmaps.cc (sector bitmap reads, waits
// and write-backs) and vhd_commit.cc (allocation and group commit). vhd_dynamic.h describes
// the design.
#ifndef VSTACK_FORMATS_VHD_VHD_DYNAMIC_QUEUE_H_
#define VSTACK_FORMATS_VHD_VHD_DYNAMIC_QUEUE_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "formats/vhd/vhd_dynamic.h"
#include "lib/aligned_buffer.h"
#include "lib/layer.h"
#include "lib/parent_completion.h"

namespace vstack::vhd {

class DynamicQueue;
struct Piece;

// One caller's request, split into pieces that each stay within one block. `pending` counts
// the units still outstanding (pieces, plus extra lower requests and bitmap writes some
// pieces need); whoever finishes the last one completes the request.
struct Request {
  AtomicPendingParent done;  // pieces may finish on another queue's thread (a commit)
  DynamicQueue* owner = nullptr;
  std::vector<Piece> pieces;
};

struct Piece {
  Request* req = nullptr;
  uint32_t block = 0;
  uint32_t first = 0;       // first sector within the block
  uint32_t count = 0;       // sectors
  uint64_t buf_offset = 0;  // byte offset of this piece in the caller's buffers
};

// The bitmap of a partially written block. `disk` is what completed writes put on disk;
// `mem` adds the bits of writes whose bitmap update is pending; `inflight` is the copy being
// written. A write completes only once its bits are in `disk`.
//
// A write into clear sectors sets its bits in `mem` only once its data is written, and the
// bitmap write that carries them is preceded by a flush: a set bit never reaches the disk, nor
// a reader, before the data it covers (clear sectors may hold anything: garbage left by other
// tools or by a write a crash interrupted, or the place of the parent's data in a differencing
// disk). Exception: `clear_zero`, a dynamic disk's block this open allocated (in zeroed space),
// whose clear sectors are known to hold zeros, so data and bits go down together and a bit
// that lands first shows zeros, the old contents.
struct BitmapState {
  std::vector<uint8_t> mem, disk, inflight;
  bool loaded = false, loading = false, writing = false;
  bool clear_zero = false;
  uint32_t data_pending = 0;       // writes into clear sectors whose data is in flight
  std::vector<Piece*> wait_load;   // to translate again once loaded
  std::vector<Piece*> wait_write;  // bits are in `inflight`
  std::vector<Piece*> wait_next;   // bits are only in `mem`
};

// A block being allocated: open (collecting writes) until a commit takes it.
struct Allocation {
  uint32_t block = 0;
  bool committing = false;
  uint64_t pos = 0;            // byte offset of its bitmap
  std::vector<uint8_t> bits;   // the sectors its writes cover
  std::vector<Piece*> pieces;  // written by the commit
  std::vector<Piece*> later;   // arrived during the commit: translated again afterwards
};

// One thread's queue of a dynamic VHD (see vhd_dynamic.h for the design).
class DynamicQueue final : public LayerQueue {
 public:
  DynamicQueue(BlockDevice& device, DynamicState& state, std::unique_ptr<IoQueue> lower,
               std::unique_ptr<IoQueue> parent_queue)
      : LayerQueue(device, std::move(lower)), st_(state), parent_(std::move(parent_queue)) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override;
  // Runs hand-offs from other queues, then polls below (yielding if nothing is in flight).
  void DoPoll(bool wait) override;

 private:
  enum class Kind : uint8_t {
    kPiece,
    kPartialData,  // data of a write into a partially written block: its bits follow
    kDirect,  // serves a caller's request whole: a flush, or a request in one full block
    kBitmapRead,
    kBitmapFlush,  // makes the data durable before the bitmap write `next`
    kBitmapWrite,
    kCommit
  };
  enum class Action : uint8_t { kTranslate, kBitmapWait };

  // A request this queue sends down.
  struct LowerOp {
    IoRequest req;
    std::vector<iovec> iov;
    AlignedBuffer buf;  // metadata payload
    DynamicQueue* queue = nullptr;
    Kind kind = Kind::kPiece;
    Request* request = nullptr;   // kPiece: the unit it finishes
    Piece* piece = nullptr;       // kPartialData
    LowerOp* next = nullptr;      // kBitmapFlush: the bitmap write it precedes
    IoRequest* parent = nullptr;  // kDirect
    uint32_t block = 0;           // bitmap I/O
  };

  struct Handoff {
    Piece* piece;
    Action action;
  };

  // The steps of an allocation commit (docs/layers/vhd.md, "Write order").
  enum class Stage : uint8_t {
    kGrow,           // growable: the footer at the new end of the file, with FUA
    kBlocksAndBat,   // growable: bitmaps, data and BAT sectors, all at once
    kData,           // growable differencing: the data first,
    kDataFlush,      // ... made durable,
    kBitmapsAndBat,  // ... then the bitmaps and BAT sectors
    kBlocks,         // fixed-size device: bitmaps, data and zeros over stale free space
    kBlocksFlush,    // ... made durable before the BAT points at them
    kBat,            // fixed-size device: the BAT sectors
    kUndoBat,        // failed after BAT sectors went down: they are written again without
                     // the new entries, so the failed blocks never appear after a reopen
  };

  // The commit this queue is running (one at a time per device).
  struct Commit {
    std::vector<std::unique_ptr<Allocation>> allocs;
    uint64_t footer_at = 0;
    Stage stage = Stage::kGrow;
    uint32_t pending = 0;
    std::error_code error;
    std::error_code undone;             // kUndoBat: the error that failed the commit
    std::vector<uint64_t> bat_sectors;  // the BAT sectors written so far
  };

  // ---- requests and completion (vhd_dynamic_queue.cc) ----

  // Splits a caller's request into per-block pieces and translates each (flush: one flush
  // below).
  void Start(IoRequest& parent);
  // The common case, without pieces: a read, write or write-zeroes within one block that is
  // allocated and full (or zeroing an allocated one) goes down as one request, which completes
  // it. Returns false if `parent` is not such a request.
  bool StartDirect(IoRequest& parent);
  Request* NewRequest();
  // Finishes one unit of `r`; the last one completes the caller's request, here or, for
  // another queue's request, with PostCompletion.
  void Finish(Request* r, std::error_code ec);

  // ---- translation ----

  // Maps one piece to I/O below: zeros for unallocated blocks, direct I/O for full ones, the
  // bitmap path for partial ones, an allocation for the first write to a block. Runs on the
  // piece's own queue.
  void Translate(Piece* p);
  // Queues `p` behind the bitmap write that will carry its bits. Returns true (and the bits
  // to write) if the caller must start that write now. REQUIRES: st_.mu held.
  bool WaitForBitmap(BitmapState& bs, Piece* p, std::vector<uint8_t>* snapshot);
  // A piece handed back after the bitmap write it waited for left its bits out.
  void ResumeBitmapWait(Piece* p);
  // Answers a read piece with what lies below this image (zeros, or the parent's data);
  // other pieces just finish.
  void ZeroPiece(Piece* p);
  // Reads the set runs (runs_) of a partial block; the clear ones come from below.
  void ReadRuns(Piece* p);
  // Sectors [first, first + count) of read piece `p` that this image does not hold: one read
  // of the parent (zeros past its end), or zeros without I/O. Returns true if it issued a
  // read, which finishes one unit of the request; false if it is done already.
  bool ReadBelow(Piece* p, uint32_t first, uint32_t count);
  // Reads, writes or zeroes sectors [first, first + count) of `p`'s block, at `entry`.
  // `kind` kPartialData: a write whose bits are set only once it is done (OnPartialData).
  void IssueData(Piece* p, uint32_t entry, uint32_t first, uint32_t count,
                 Kind kind = Kind::kPiece);
  // The data of a write into a partially written block is written: its bits go into `mem`
  // (reads now see it) and into the next bitmap write.
  void OnPartialData(Piece* p, std::error_code ec);

  // ---- bitmaps ----

  void IssueBitmapRead(uint32_t block, uint32_t entry);
  // The bitmap write, after a flush (the data its bits cover becomes durable) unless the
  // block's clear sectors are known zeros (BitmapState::clear_zero).
  void IssueBitmapWrite(uint32_t block, uint32_t entry, const std::vector<uint8_t>& bits,
                        bool after_flush);
  // Loaded: the waiting pieces are translated again (on their own queues).
  void OnBitmapRead(LowerOp* op, std::error_code ec);
  // Written: completes the pieces whose bits it carried, and writes the next copy if this
  // queue has a piece waiting for one (others are handed back to their queues).
  void OnBitmapWrite(LowerOp* op, std::error_code ec);
  // Failed: clears the failed pieces' bits that are neither on disk nor needed by `retry`, so
  // that reads before and after a reopen agree (vhd_dynamic_bitmaps.cc).
  static void ForgetFailedBits(BitmapState& bs, const std::vector<Piece*>& failed,
                               const std::vector<Piece*>& retry);

  // ---- allocation and group commit (vhd_commit.cc) ----

  // Adds a write to its block's open allocation (creating it), or, if the block is being
  // committed, to the pieces translated again afterwards. REQUIRES: st_.mu held.
  void JoinAllocation(Piece* p);
  // Starts a commit if this queue added blocks and nobody holds the commit role.
  void MaybeStartCommit();
  // Commits the open group. REQUIRES: this queue holds the commit role.
  void RunCommit();
  // One lower request of the commit finished; the last of a stage starts the next.
  void OnCommitOp(std::error_code ec);
  void IssueCommitFlush();
  // The stages of a commit into space reserved earlier (growable): differencing disks write
  // data, flush, then bitmaps and BAT; dynamic disks all at once.
  void StageInReservedSpace();
  // The new blocks' bitmaps, with the exact bits. Adds to `pending`.
  void StageBitmaps();
  // The data of the writes, and (over a fixed-size device whose free space may hold old
  // bytes) zeros for the rest of each block. Adds to `pending`.
  void StageData();
  // The BAT sectors holding the new entries, one write per sector, and any sector a failed
  // undo left behind (DynamicState::stale_bat_sectors). With `new_entries` false, the sectors
  // as memory has them, without this commit's entries (undoing a failed commit). Adds to
  // `pending`.
  void StageBat(bool new_entries = true);
  // Publishes the entries (unless the commit failed: then the blocks are leaked), completes
  // the writes, translates the late arrivals again, and passes the commit role on.
  void FinishCommit(std::error_code ec);

  // ---- hand-offs between queues ----

  // Runs `action` for `p` on its own queue: here if it is ours, else through its inbox.
  void Redo(Piece* p, Action action);
  // Called by other queues (thread-safe): work for this queue, the commit role, and a
  // finished request to recycle.
  void Hand(Handoff h);
  void Kick();
  void Give(Request* r);
  // Runs what other queues handed over. Returns true if there was work.
  bool DrainInbox();
  // Starts a commit if one is due and submits what was issued, as one batch.
  void AfterWork() {
    if (want_commit_) MaybeStartCommit();
    if (!outgoing_.empty() || !parent_outgoing_.empty()) FlushOutgoing();
  }

  // ---- lower requests ----

  LowerOp* NewOp(Kind kind) {
    LowerOp* op = ops_.Get();
    // The caller's fields of the request; the queue below sets its own when it is submitted
    // (assigning IoRequest{} would also construct a std::error_code, a call into libstdc++).
    op->req.op = Op::kRead;
    op->req.flags = 0;
    op->req.offset = 0;
    op->req.length = 0;
    op->req.iov = nullptr;
    op->req.iovcnt = 0;
    op->req.on_complete = &DynamicQueue::OnLowerDone;
    op->req.user_data = op;
    op->iov.clear();
    op->queue = this;
    op->kind = kind;
    op->request = nullptr;
    op->piece = nullptr;
    op->next = nullptr;
    op->parent = nullptr;
    return op;
  }
  // Makes `op` a read or write of `len` metadata bytes at `offset` through its own buffer,
  // filled from `src` (a write; nullptr leaves it for the caller to fill).
  void SetPayload(LowerOp* op, Op rw, uint64_t offset, const void* src, size_t len);
  // Requests go down in batches: Issue collects, FlushOutgoing submits.
  void Issue(LowerOp* op) { outgoing_.push_back(&op->req); }
  void IssueToParent(LowerOp* op) { parent_outgoing_.push_back(&op->req); }
  void FlushOutgoing();
  // Submits what `pending` holds to `queue`, keeping the vector's capacity for the next batch.
  static void SubmitPending(std::vector<IoRequest*>& pending, IoQueue& queue);
  static void OnLowerDone(IoRequest& req);

  struct Run {
    uint32_t first, count;
    bool set;
  };

  DynamicState& st_;
  std::unique_ptr<IoQueue> parent_;  // differencing disks: a queue of st_.parent
  std::vector<IoRequest*> parent_outgoing_;
  RequestPool<Request> requests_;
  RequestPool<LowerOp> ops_;
  std::vector<IoRequest*> outgoing_;
  std::vector<Run> runs_;
  std::unique_ptr<Commit> commit_;
  bool want_commit_ = false;

  std::mutex inbox_mu_;
  std::atomic<bool> inbox_flag_{false};
  std::vector<Handoff> inbox_;      // guarded by inbox_mu_
  std::vector<Request*> returned_;  // guarded by inbox_mu_
  bool kick_ = false;               // guarded by inbox_mu_: take over the commit role
};

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_DYNAMIC_QUEUE_H_
