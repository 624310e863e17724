// Exchange: where the threads of one parallel query meet after every step (`vstack bench
// --exchange`), as a parallel plan's workers meet at an exchange operator and wait for the
// slowest (SQL Server's CXPACKET wait). A thread that arrives sleeps until every member still
// taking part has arrived; then all go on together. A member that ends leaves, and the others no
// longer wait for it, whether they are waiting already or arrive later.
//
// Waiting threads sleep on a condition variable (std::barrier's waits spin and call
// sched_yield first, which on a machine of two cores takes the CPU the workload needs).
// Thread-safe.
#ifndef VSTACK_BENCH_WORKLOAD_EXCHANGE_H_
#define VSTACK_BENCH_WORKLOAD_EXCHANGE_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace vstack::bench {

class Exchange {
 public:
  explicit Exchange(uint32_t members) : members_(members) {}

  // Arrives at the exchange and waits until every member has arrived or left.
  void ArriveAndWait() {
    std::unique_lock lock(mu_);
    const uint64_t generation = generation_;
    if (++arrived_ >= members_) {
      Open();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

  // Members that have arrived and wait now.
  uint32_t Waiting() {
    std::lock_guard lock(mu_);
    return arrived_;
  }

  // Stops taking part, without arriving; releases the others if they were waiting only for it.
  void Leave() {
    std::lock_guard lock(mu_);
    if (members_ > 0) --members_;
    if (arrived_ > 0 && arrived_ >= members_) Open();
  }

 private:
  void Open() {  // holds mu_
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  uint32_t members_;
  uint32_t arrived_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_WORKLOAD_EXCHANGE_H_
