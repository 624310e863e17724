// CPU attribution: which layer (or phase of a layer) a thread is working for, and a low-rate
// sampler that charges each enrolled thread's CPU time to it.
//
// The tag. Every thread has a current CpuAccount, its tag (none at first). IoQueue sets its
// device's account while the device's code runs (Submit's checks and DoSubmit, Poll's DoPoll)
// and, while a completion callback runs, the account of whoever submitted the request (the
// layer above, or none for the workload): one thread-local store at each layer boundary, no
// clock read. A layer that splits its CPU into phases (hash, index, metadata ...) sets a phase's
// account around the phase's code with ScopedCpuTag.
//
// The sampler. While a CpuSampling lives, every enrolled thread (EnrolledThread) carries a POSIX
// timer on its own CPU clock that signals the thread itself (SIGPROF, SIGEV_THREAD_ID). At each
// expiry the thread's handler charges the CPU the thread used since its previous sample to its
// current tag, or to its home account when it has none. So over any interval the accounts add up
// to the enrolled threads' CPU (up to one sample per thread at each edge of the interval), while
// how that CPU divides between accounts is a sample, whose error shrinks as 1/sqrt(samples). The
// kernel checks CPU timers at its scheduler tick (CONFIG_HZ), so a busy thread is sampled at most
// HZ times per second of CPU. Threads that are not enrolled are never sampled: their CPU is in no
// account, which a report sees by comparing the accounts' sum with the process's CPU.
//
// No privileges are needed. The handler is installed once, for good (a signal still pending when
// sampling stops must find it), and refuses to take over a SIGPROF handler someone else installed.
// Sampled threads may see system calls end early with EINTR (SA_RESTART restarts most): code
// that runs on them retries on EINTR, as lib/ and blockdev/ do.
#ifndef VSTACK_LIB_CPU_ACCOUNT_H_
#define VSTACK_LIB_CPU_ACCOUNT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

// A place CPU is charged to: one layer, one phase of a layer, or the workload's own code.
// Thread-safe; the counters only grow.
struct CpuAccount {
  std::atomic<uint64_t> ns{0};       // CPU charged, in nanoseconds
  std::atomic<uint64_t> samples{0};  // samples that charged it
};

// The phases a layer may split its CPU into: a small fixed set, so that every layer's split
// reads the same way (docs/bench.md). Each device has one CpuAccount per phase beside its own
// (BlockDevice::cpu_phase_account); the layer tags the thread with a phase's account around the
// phase's code, and the CPU sampled outside every phase stays in the layer's own account (its
// "other" share).
enum class CpuPhase : uint8_t {
  kHash,        // fingerprinting a grain (dedup)
  kCompress,    // compressing a grain (zstd)
  kDecompress,  // decompressing a grain (zstd)
  kPack,        // fitting compressed fragments into shared units (zstd's bin packer)
  kChecksum,    // computing or checking a grain's checksum (crc32c)
  kIndex,       // finding where data lives or goes: a map, index or BAT lookup and update
  kMetadata,    // making metadata durable: journal commits, table and bitmap writes
  kSubmit,      // handing requests to the device below, and handling their completions
};
inline constexpr size_t kCpuPhaseCount = 8;
// The phase's name in reports: "hash", "compress", ... "submit".
const char* CpuPhaseName(CpuPhase phase);

// The calling thread's tag (nullptr: none).
CpuAccount* CurrentCpuTag();

// Tags the calling thread with `account` for the scope, then restores the previous tag.
class ScopedCpuTag {
 public:
  explicit ScopedCpuTag(CpuAccount* account);
  ~ScopedCpuTag();
  ScopedCpuTag(const ScopedCpuTag&) = delete;
  ScopedCpuTag& operator=(const ScopedCpuTag&) = delete;

 private:
  CpuAccount* saved_;
};

// Enrolls the calling thread in CPU sampling for the object's lifetime: the thread is sampled
// while any CpuSampling lives, and CPU it spends with no tag is charged to `home` (the workload's
// own code for a workload thread, the layer for a layer's helper thread). Create it on the thread
// itself and destroy it there (before the thread exits); enrolments do not nest.
class EnrolledThread {
 public:
  explicit EnrolledThread(CpuAccount& home);
  ~EnrolledThread();
  EnrolledThread(const EnrolledThread&) = delete;
  EnrolledThread& operator=(const EnrolledThread&) = delete;

  struct Entry;

 private:
  std::unique_ptr<Entry> entry_;
};

// Samples every enrolled thread, those enrolled now and those that enrol later, while it lives.
// Several may live at once (sampling goes on until the last one ends). Thread-safe.
class CpuSampling {
 public:
  // Fails when SIGPROF has another handler, or when the timers cannot be made; then nothing is
  // sampled.
  static Result<std::unique_ptr<CpuSampling>> Start();
  ~CpuSampling();
  CpuSampling(const CpuSampling&) = delete;
  CpuSampling& operator=(const CpuSampling&) = delete;

 private:
  CpuSampling() = default;
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_CPU_ACCOUNT_H_
