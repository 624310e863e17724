// Scheduler: the one seeded decision-maker of a simulation. It runs every simulated thread as
// a fiber on the calling OS thread and is, at once:
//
//  - the SimHost of the simulated disks (blockdev/sim): for each request it decides, from the
//    seed, its delay in virtual time (or completion inside Submit), an injected error (EIO; a
//    failing write may land a prefix of its sectors first), and later delivers it;
//  - the ProgressWaiter of the thread (lib/progress.h): every wait of a layer or of the library
//    suspends the waiting fiber, so the others run meanwhile;
//  - the virtual Clock of the layers that model time (SleepUntil suspends until then).
//
// Each step it picks, with the seed, one of: a fiber that can run (one that waits is resumed
// only once something happened since it last looked), or a request of the disk whose time has
// come. When nothing can happen it moves time on to the next due request or sleeper. A waiting
// fiber may need something the scheduler cannot see (a lock released, work handed over through a
// queue's inbox): before it moves time on, it resumes every waiting fiber once more, as many
// rounds as there are fibers. Liveness: if no progress is noted (NoteProgress: a workload
// request completed; NoteAlive: another request of the simulator's did, a piece of the read back
// or a request a frozen workload reaps) for `liveness_ns` of virtual time (or twice the longest
// sleep), if nothing at all can happen while fibers still wait, or if a thread polls 100,000
// times in a row without reaping anything and without waiting (a busy wait the seam does not
// see), the run stops with a report (hang_report).
//
// Every decision and every result the workload reports goes into trace_hash(): two runs of one
// seed give the same hash. No wall clock, no thread.
#ifndef VSTACK_ANALYSIS_SIM_SCHEDULER_H_
#define VSTACK_ANALYSIS_SIM_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/sim/fiber.h"
#include "blockdev/sim/sim_device.h"
#include "blockdev/sim/sim_rng.h"
#include "lib/clock.h"
#include "lib/entropy.h"
#include "lib/progress.h"
#include "lib/splitmix64.h"

namespace vstack::sim {

// How the simulated disks behave; drawn per run (RunConfig).
struct DiskTiming {
  uint64_t min_delay_ns = 1'000;
  uint64_t max_delay_ns = 100'000;
  double slow_rate = 0.05;        // a request takes up to 20x max_delay_ns
  double inline_rate = 0.05;      // a request completes inside Submit
  double eio_rate = 0;            // a request fails with EIO (while faults are on)
  double torn_error_rate = 0.5;   // a failing write lands a prefix of its sectors first
  uint64_t step_ns = 500;         // virtual time one fiber step takes (at most)
  uint64_t liveness_ns = 2'000'000'000;
};

class Scheduler final : public SimHost, public ProgressWaiter, public Clock, public EntropySource {
 public:
  enum class End { kDone, kStopped, kHang, kThrew };

  // Installs itself as the calling thread's SimHost, ProgressWaiter and EntropySource until
  // destroyed (or Detach).
  Scheduler(uint64_t seed, DiskTiming timing);
  ~Scheduler() override;
  // Gives the thread back its previous host, waiter and entropy (a scheduler kept after a hang).
  void Detach();

  // Disks, by name (a new entry replaces an old one: a stack opened later gets the new disk).
  void SetDisk(const std::string& name, SimDiskEntry entry);
  SimDiskEntry* Disk(const std::string& name);

  // A new simulated thread running `body`.
  void Spawn(std::string name, std::function<void()> body);
  // Runs the fibers until all have finished (kDone), `stop` returns true before a step
  // (kStopped: the fibers stay suspended; call Run again to go on), liveness fails (kHang), or
  // a thread's body throws (kThrew); hang_report() then says what happened. With `stop` empty
  // it is never asked.
  End Run(const std::function<bool()>& stop = {});
  // The report of the last kHang, and a description of the stack whose queues it names
  // (`top`: the device whose chain of lower() devices is listed).
  const std::string& hang_report() const { return hang_report_; }
  void set_report_stack(BlockDevice* top) { report_top_ = top; }

  // Inside a fiber: lets the others run (the fiber stays runnable).
  void Yield();
  // Something the workload counts as progress happened (a request completed).
  void NoteProgress();
  // A request completed that the workload does not count (a piece of the read back, one a
  // frozen workload reaps): the stack is not stuck. Resets the liveness clock only; the
  // schedule stays as it was.
  void NoteAlive() { last_progress_ = now_; }
  // Injected errors on or off (they stay off while opening, checking and verifying).
  void set_faults(bool on) { faults_ = on; }
  // Folds a result into the trace.
  void Trace(uint64_t tag, uint64_t value);
  uint64_t trace_hash() const { return trace_; }
  SimRng& rng() { return rng_; }
  uint64_t steps() const { return steps_; }

  // SimHost.
  const SimDiskEntry* FindDisk(const std::string& name) override { return Disk(name); }
  std::string DiskNames() override;
  bool Submitted(SimRequest& r) override;
  void Polled(SimQueue& q, size_t reaped) override;
  void QueueOpened(SimQueue& q) override;
  void QueueClosed(SimQueue& q) override;
  // ProgressWaiter.
  void Wait(const char* what) override;
  // Clock.
  uint64_t Now() override { return now_; }
  void SleepUntil(uint64_t deadline_ns) override;
  void Spin(uint64_t ns) override { SleepUntil(now_ + ns); }
  // EntropySource: IDs from the seed (a generator of their own, so that the schedule's draws
  // stay as they were), and virtual time from a fixed epoch.
  uint64_t Random64() override { return ids_.Next(); }
  uint64_t UnixSeconds() override { return kSimEpochUnixSeconds + now_ / 1'000'000'000; }

 private:
  struct Thread;

  Thread* Running();
  // Suspends the running fiber in `state`.
  void SuspendAs(int state, const char* what, uint64_t until);
  // The fibers and deliveries that can happen now.
  void Candidates(std::vector<int>& out);
  void Step(int candidate);
  // Resumes every waiting fiber once (a quiet round).
  void QuietRound();
  // True (with the report written) if no progress was noted for too long.
  bool LivenessExpired();
  std::string Report(const std::string& why);

  // 2026-01-01 00:00:00 UTC: the wall-clock time of virtual time 0.
  static constexpr uint64_t kSimEpochUnixSeconds = 1'767'225'600;

  SimRng rng_;
  SplitMixRng ids_;
  DiskTiming timing_;
  uint64_t now_ = 1'000'000'000;
  uint64_t trace_ = 0xCBF29CE484222325ull;
  uint64_t steps_ = 0;
  uint64_t next_request_ = 0;
  uint64_t activity_ = 0;     // bumped by anything a waiting fiber may be waiting for
  uint64_t last_progress_ = 0;
  uint64_t longest_sleep_ns_ = 0;  // the longest SleepUntil of a fiber, from when it was asked
  bool faults_ = false;
  bool exception_ = false;  // a thread threw (the run ends)
  uint64_t idle_polls_ = 0;  // polls that reaped nothing since a thread last suspended
  bool busy_wait_ = false;   // a thread polled without waiting for too long (the run ends)
  bool installed_ = true;
  SimHost* previous_host_ = nullptr;
  ProgressWaiter* previous_waiter_ = nullptr;
  EntropySource* previous_entropy_ = nullptr;
  std::map<std::string, SimDiskEntry> disks_;
  std::vector<std::unique_ptr<Thread>> threads_;
  std::vector<SimRequest*> pending_;  // requests the disks will deliver (at r->due)
  std::vector<SimQueue*> queues_;  // open queues of simulated disks, in opening order
  BlockDevice* report_top_ = nullptr;
  std::string hang_report_;
};

}  // namespace vstack::sim

#endif  // VSTACK_ANALYSIS_SIM_SCHEDULER_H_
