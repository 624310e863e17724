// The knobs of one workload, modelled on diskspd and fio, and their validation. Errors name the
// command-line flag (`--bs`, `--qd` ...) so the CLI can print them as they are.
#ifndef VSTACK_BENCH_WORKLOAD_KNOBS_H_
#define VSTACK_BENCH_WORKLOAD_KNOBS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lib/block_device.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack::bench {

enum class AccessPattern { kRandom, kSequential };
enum class Distribution { kUniform, kZipf };
// What write buffers hold. kRandom: incompressible bytes, every 4 KiB chunk unique unless
// dedupe_pct/compress_pct say otherwise. kZeros: all zeros. kPattern: the bytes 0, 1, ..., 255
// repeating, in every write (diskspd's default write buffer).
enum class Content { kRandom, kZeros, kPattern };

struct WorkloadKnobs {
  uint32_t block_size = 8192;      // --bs: bytes per request
  uint32_t write_pct = 50;         // --write-pct: share of requests that write (0..100)
  AccessPattern pattern = AccessPattern::kRandom;  // --pattern
  uint32_t queue_depth = 8;        // --qd: outstanding requests per thread
  uint32_t threads = 4;            // --threads: each with its own IoQueue
  double duration_s = 2.0;         // --duration: measured time (when io_count == 0)
  uint64_t io_count = 0;           // --ios: measured reads + writes over all threads; 0 = timed
  double warmup_s = 0.5;           // --warmup: run but not measured
  uint64_t target_size = 256ull << 20;  // --size: bytes exercised from offset 0; 0 = whole device
  uint64_t seed = 1;               // --seed
  Distribution distribution = Distribution::kUniform;  // --distribution
  double zipf_theta = 1.2;         // --distribution zipf:THETA
  uint32_t flush_interval = 0;     // --flush-interval: a flush after every N writes per thread
  Content content = Content::kRandom;  // --content
  uint32_t dedupe_pct = 0;         // --dedupe-pct: writes that repeat an earlier write's data
  uint32_t compress_pct = 0;       // --compress-pct: share of each 4 KiB chunk that is zeros
  // The quantum scheduler (quantum_scheduler.h): off when quantum_ns is 0.
  uint64_t quantum_ns = 0;         // --quantum (4 ms when --cpu-ready is given)
  uint32_t schedulers = 1;         // threads share this many schedulers (vCPUs)
  double cpu_ready_pct = 0;        // --cpu-ready: RDY% stalls injected on each scheduler
  std::string ready_stall = "exp:4ms";  // --ready-stall: stall length distribution
  std::string task_cpu;            // --task-cpu: CPU a thread works before each I/O; "": none
  bool task_cpu_sleeps = false;    // --task-cpu-mode sleep: held on the scheduler, not burned
  // --exchange: the threads run as one parallel query (QD1 each): a thread's next step (its
  // CPU and I/O) starts only when every thread has finished the current one, as a parallel
  // plan's workers meet at an exchange (SQL Server's CXPACKET wait). The slowest thread, or
  // the scheduler that is stalled, sets the pace of all.
  bool exchange = false;
  // --cpu-sampling: sample each thread's CPU by layer (lib/cpu_account.h) for the per-layer
  // CPU of the attribution. Off only to measure what the sampling costs.
  bool sample_cpu = true;
};

// Checks the knobs alone; the message names the flag and the allowed range.
Status ValidateKnobs(const WorkloadKnobs& k);

// Checks the knobs against an opened device: block alignment, size, writability, whether
// several queues are allowed.
Status CheckKnobsAgainstDevice(const WorkloadKnobs& k, const BlockDevice& device);

// Bytes of `device` the run exercises: target_size (or the whole device) rounded down to the
// block size.
uint64_t RegionBytes(const WorkloadKnobs& k, const BlockDevice& device);

// "8 KiB random (uniform), 50% writes, 4 threads x QD8, 2 s + 0.5 s warm-up"
std::string DescribeWorkload(const WorkloadKnobs& k);
// "random (dedupe 0%, compress 0%)", "zeros" or "pattern (bytes 0..255 repeating)"
std::string DescribeContent(const WorkloadKnobs& k);
// The --pattern names: "random", "sequential".
std::vector<std::string> PatternNames();
// The --content names, "random", "zeros", "pattern", and the name of one.
std::vector<std::string> ContentNames();
std::string ContentName(Content c);
// Parses a --content name into `k`.
Status ParseContent(const std::string& text, WorkloadKnobs* k);
// "uniform" or "zipf:1.2"
std::string DescribeDistribution(const WorkloadKnobs& k);
// Parses "uniform" or "zipf:THETA" into `k`.
Status ParseDistribution(const std::string& text, WorkloadKnobs* k);

}  // namespace vstack::bench
VSTACK_PUBLIC_END

#endif  // VSTACK_BENCH_WORKLOAD_KNOBS_H_
