// The exchange of `vstack bench --exchange`: no thread starts a step before every member has
// finished the one before, and members that leave early do not hold the others.
#include "bench/workload/exchange.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace vstack::bench {
namespace {

TEST(Exchange, NoThreadStartsAStepBeforeEveryThreadHasFinishedTheOneBefore) {
  constexpr uint32_t kThreads = 4;
  constexpr int kSteps = 300;
  Exchange exchange(kThreads);
  std::vector<std::atomic<int>> finished(kThreads);
  std::atomic<int> early{0};  // a thread found another behind it after the exchange
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int step = 1; step <= kSteps; ++step) {
        if ((step + t) % 7 == 0) std::this_thread::yield();  // uneven steps
        finished[t].store(step);
        exchange.ArriveAndWait();
        for (uint32_t u = 0; u < kThreads; ++u) {
          if (finished[u].load() < step) early.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(early.load(), 0);
}

// Thread t takes part in 10 * (t + 1) steps, then leaves: the ones still running go on without
// it (without Leave this test would hang at thread 0's eleventh step).
TEST(Exchange, MembersThatLeaveNoLongerHoldTheOthers) {
  constexpr uint32_t kThreads = 4;
  Exchange exchange(kThreads);
  std::vector<std::atomic<int>> steps(kThreads);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t step = 0; step < 10 * (t + 1); ++step) {
        exchange.ArriveAndWait();
        steps[t].fetch_add(1);
      }
      exchange.Leave();
    });
  }
  for (std::thread& th : threads) th.join();
  for (uint32_t t = 0; t < kThreads; ++t) EXPECT_EQ(steps[t].load(), int(10 * (t + 1)));
}

// The last member leaving while the others wait opens the exchange for them.
TEST(Exchange, ALeaveReleasesMembersThatWereWaitingOnlyForIt) {
  Exchange exchange(3);
  std::atomic<int> through{0};
  std::thread a([&] { exchange.ArriveAndWait(); through.fetch_add(1); });
  std::thread b([&] { exchange.ArriveAndWait(); through.fetch_add(1); });
  while (exchange.Waiting() != 2) std::this_thread::yield();
  EXPECT_EQ(through.load(), 0);
  exchange.Leave();
  a.join();
  b.join();
  EXPECT_EQ(through.load(), 2);
}

}  // namespace
}  // namespace vstack::bench
