// Workload: what the simulated threads do to the device under test, each on a queue of its
// own: reads, writes (content.h: random, zeros, repeated patterns, text), flushes, discards,
// write-zeroes and allocation maps (MapExtents, called from the thread while its requests are
// in flight, as any thread may), in seeded proportions, up to a queue depth, sometimes several
// requests in one Submit. Every result is checked against the model (model.h) as it comes back;
// a wrong one becomes a failure. Freeze() stops the threads (a power cut, or a failure): they
// submit nothing more, reap what they have in flight without telling the model, close their
// queues and end.
#ifndef VSTACK_ANALYSIS_SIM_WORKLOAD_H_
#define VSTACK_ANALYSIS_SIM_WORKLOAD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analysis/sim/model.h"
#include "analysis/sim/scheduler.h"
#include "lib/block_device.h"

namespace vstack::sim {

struct SimFailure {
  std::string kind;  // hang, data, lost, check, open, close, error, map, crash, timeout, exception
  std::string message;
};

// The mix of one run, drawn from its seed.
struct WorkloadConfig {
  uint64_t region_offset = 0;  // requests fall in [region_offset, +region_bytes)
  uint64_t region_bytes = 0;
  uint32_t queue_depth = 4;
  uint32_t max_units = 128;  // longest request, in 512-byte units
  uint32_t align_units = 1;  // requests start and end on multiples of this many units
  // Relative weights of the operations.
  uint32_t reads = 4, writes = 6, flushes = 1, discards = 1, zeroes = 1, maps = 0;
  double fua = 0.05;    // a write carries FUA
  double batch = 0.2;   // a Submit carries 2 to 4 requests
  double think = 0.3;   // the thread lets the others run before its next request
  bool errors_expected = false;  // the disk injects EIO: it may surface on any request
  // True if a request `op` may fail with `ec` because a layer injects it (SimStack::MayInject).
  std::function<bool(Op op, std::error_code ec)> may_inject;
};

class Workload {
 public:
  Workload(Scheduler& sched, Model& model, BlockDevice& device, WorkloadConfig config,
           uint64_t ops);
  ~Workload();

  // The body of simulated thread `index`.
  void Thread(int index, SimRng rng);
  // Stops the threads: nothing more is submitted, completions no longer reach the model.
  void Freeze() { frozen_ = true; }
  bool frozen() const { return frozen_; }

  uint64_t submitted() const { return submitted_; }
  // The requests (maps included) that completed before the workload froze.
  uint64_t completed() const { return completed_; }
  const std::vector<SimFailure>& failures() const { return failures_; }

 private:
  struct Request;
  struct Record {  // what an op was, for messages
    uint8_t kind = 0;
    uint8_t thread = 0;
    uint64_t offset = 0, length = 0;
  };

  Request* Make(int thread, SimRng& rng);
  void Map(int thread, SimRng& rng);
  static void OnComplete(IoRequest& req);
  void Finish(Request* op);
  void Fail(std::string kind, std::string message);
  // True if a request `op` may fail with `ec`: an error the run injects, or a full disk.
  bool Allowed(Op op, std::error_code ec) const;
  std::string Name(uint64_t id) const;
  static std::string NameOf(void* self, uint64_t id) {
    return static_cast<Workload*>(self)->Name(id);
  }

  Scheduler& sched_;
  Model& model_;
  BlockDevice& device_;
  const WorkloadConfig config_;
  uint64_t remaining_;
  uint64_t submitted_ = 0;
  uint64_t completed_ = 0;
  bool frozen_ = false;
  std::vector<Record> records_;  // by op id - 1
  std::vector<SimFailure> failures_;
  std::vector<uint32_t> in_flight_;  // per thread
};

}  // namespace vstack::sim

#endif  // VSTACK_ANALYSIS_SIM_WORKLOAD_H_
