// One caller's request served by several pieces (lower requests, grain operations, a flush
// after them): counts the pieces still outstanding, keeps the first error, and tells whoever
// finishes the last piece that it is time to complete the caller's request.
//
//   PendingParent p;
//   p.Start(parent, 1);           // 1: a guard held while the pieces are being issued
//   for (...) { p.Add(); Issue(piece); }
//   if (p.Done({})) Complete(*p.parent(), p.error());   // drop the guard
//   ...in each piece's callback: if (p.Done(status)) Complete(*p.parent(), p.error());
//
// PendingParent is for pieces that all finish on the owner queue's thread (the usual case: lower
// completions run there). AtomicPendingParent is the same for pieces that may finish on other
// threads (e.g. a metadata commit done by another queue); the thread whose Done returns true
// sees the first error.
#ifndef VSTACK_LIB_PARENT_COMPLETION_H_
#define VSTACK_LIB_PARENT_COMPLETION_H_

#include <atomic>
#include <cstdint>
#include <system_error>

#include "lib/io_request.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

class PendingParent {
 public:
  // Begins serving `parent` with `pending` pieces outstanding and no error.
  void Start(IoRequest* parent, uint32_t pending) {
    parent_ = parent;
    pending_ = pending;
    error_.clear();
  }
  void Add(uint32_t n = 1) { pending_ += n; }
  // One piece finished with `status`. True if it was the last: complete parent() with error().
  bool Done(std::error_code status) {
    if (status && !error_) error_ = status;
    return --pending_ == 0;
  }
  // Records an error without finishing a piece.
  void Fail(std::error_code status) {
    if (status && !error_) error_ = status;
  }

  IoRequest* parent() const { return parent_; }
  uint32_t pending() const { return pending_; }
  std::error_code error() const { return error_; }

 private:
  IoRequest* parent_ = nullptr;
  uint32_t pending_ = 0;
  std::error_code error_;
};

class AtomicPendingParent {
 public:
  // REQUIRES: no piece of an earlier use is still outstanding.
  void Start(IoRequest* parent, uint32_t pending) {
    parent_ = parent;
    failed_.store(false, std::memory_order_relaxed);
    error_.clear();
    pending_.store(pending, std::memory_order_relaxed);
  }
  void Add(uint32_t n = 1) { pending_.fetch_add(n, std::memory_order_relaxed); }
  bool Done(std::error_code status) {
    if (status && !failed_.exchange(true, std::memory_order_relaxed)) error_ = status;
    return pending_.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }

  IoRequest* parent() const { return parent_; }
  // Read only after Done returned true.
  std::error_code error() const { return error_; }

 private:
  IoRequest* parent_ = nullptr;
  std::atomic<uint32_t> pending_{0};
  std::atomic<bool> failed_{false};
  std::error_code error_;  // written once, by the thread that set failed_
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_PARENT_COMPLETION_H_
