// Test-only switches that bring back bugs vstack once had, so that a test can show that the
// deterministic simulator (analysis/sim) finds each of them (tests/analysis/sim_bugs_test.cc).
// All are off, and only a test or `vstack sim --reintroduce NAME` turns one on: the code they
// guard is then wrong on purpose.
#ifndef VSTACK_LIB_HISTORICAL_BUG_H_
#define VSTACK_LIB_HISTORICAL_BUG_H_

#include <atomic>

namespace vstack {

enum class HistoricalBug : unsigned {
  // A grain layer committed (a flush) without first letting its queue below go idle
  // (GrainQueue::QuiesceBelow): over a multi-queue dynamic VHD the commit could wait forever for
  // a bitmap write that only the committing thread's other queue would complete.
  kCommitWithoutQuiesce,
  // A differencing VHD wrote a new block's data, bitmap and BAT entry all at once, with no
  // flush between them: a crash could leave the bits set over data that never landed, and the
  // sector then read zeros instead of the parent's data.
  kDiffBitsBeforeData,
  kCount
};

// The switch of `bug` (off unless a test sets it).
std::atomic<bool>& HistoricalBugSwitch(HistoricalBug bug);
// True if `bug` is switched back on.
inline bool Reintroduced(HistoricalBug bug) {
  return HistoricalBugSwitch(bug).load(std::memory_order_relaxed);
}

// The switches' names, as `vstack sim --reintroduce` takes them.
struct HistoricalBugName {
  HistoricalBug bug;
  const char* name;
};
inline constexpr HistoricalBugName kHistoricalBugNames[] = {
    {HistoricalBug::kCommitWithoutQuiesce, "commit-without-quiesce"},
    {HistoricalBug::kDiffBitsBeforeData, "diff-bits-before-data"},
};

}  // namespace vstack

#endif  // VSTACK_LIB_HISTORICAL_BUG_H_
