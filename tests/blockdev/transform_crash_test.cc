// Crash consistency of the transform layers (dedup, zstd, crc32c, and stacks of them), by the
// method of tests/testing/recording_device.h: run a workload of writes, write-zeroes, discards
// and flushes through the layers over a RecordingDevice that completes requests late and out of
// order, then build the image a power loss could leave at every event of the log (every
// submission and completion), with unflushed writes torn at 512-byte or 4 KiB sectors at a
// third of them each, reopen the layers on each and require that
//   1. they open (a crash at any point, formatting included, leaves something openable; the
//      reopen says format=on, for a crash before the format finished);
//   2. every block holds a value the contract allows: what it held at the last flush that
//      completed before the crash, or something written after that flush;
//   3. Check() finds neither corruption nor leaks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>

#include "blockdev/memory/memory_device.h"
#include "lib/iovec.h"
#include "lib/sync_io.h"
#include "tests/testing/crash_workload.h"
#include "tests/testing/layer_stack.h"
#include "tests/testing/recording_device.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {
namespace {

constexpr uint64_t kBlock = 512;

struct CrashParam {
  std::string name;
  std::string layers;   // spec of the layers above the recording device
  uint64_t lower_size;  // bytes of the memory device below
  uint64_t span;        // bytes of the virtual device the workload touches
};

void PrintTo(const CrashParam& p, std::ostream* os) { *os << p.name; }

uint64_t HashBlock(const unsigned char* p) {
  return std::hash<std::string_view>()(std::string_view(reinterpret_cast<const char*>(p), kBlock));
}

// What the workload did, as the model needs it.
struct Step {
  bool flush = false;
  uint64_t start = 0, end = 0;  // recording events before it was submitted, after it completed
};

// Steps of the workload: about 10 events each (with the layers' metadata I/O), so a few hundred
// crash points per stack.
constexpr int kSteps = 40;

// `layers` with format=on given to every layer (a crash before a format finished leaves a
// blank superblock; formatting is explicit).
std::string WithFormatOn(const std::string& layers) {
  std::string out;
  size_t start = 0;
  while (start <= layers.size()) {
    size_t end = layers.find('+', start);
    if (end == std::string::npos) end = layers.size();
    const std::string part = layers.substr(start, end - start);
    if (!out.empty()) out += "+";
    out += part + (part.find(':') == std::string::npos ? ":" : ",") + "format=on";
    start = end + 1;
  }
  return out;
}

class TransformCrash : public ::testing::TestWithParam<CrashParam> {};

TEST_P(TransformCrash, EveryCrashPointReopensConsistent) {
  const CrashParam& P = GetParam();
  const uint64_t blocks = P.span / kBlock;
  // history[b]: (step, hash) of every value block b was given; step -1 = the initial zeros.
  std::vector<std::vector<std::pair<int, uint64_t>>> history(blocks);
  std::vector<unsigned char> zero_block(kBlock, 0);
  for (auto& h : history) h.emplace_back(-1, HashBlock(zero_block.data()));
  std::vector<Step> steps;

  auto* rec =
      new RecordingDevice(MakeDevice<MemoryDevice>(P.lower_size, 512), /*defer_completions=*/true);
  std::vector<RecordedOp> log;
  uint64_t events = 0;
  {
    auto top = OpenLayersOn(P.layers, DevicePtr(rec));
    ASSERT_OK(top);
    DevicePtr dev = std::move(*top);
    auto q = dev->OpenQueue();
    ASSERT_OK(q);
    WorkloadRng rng(42);
    for (int i = 0; i < kSteps; ++i) {
      const int step = static_cast<int>(steps.size());
      Step s;
      s.start = rec->events();
      const uint64_t pick = rng.Below(100);
      if (pick < 10) {
        s.flush = true;
        IoRequest r;
        r.op = Op::kFlush;
        ASSERT_OK(Execute(**q, r));
      } else {
        // One request, or a batch of up to 4 that do not overlap.
        const int n = pick < 25 ? 4 : 1;
        std::vector<IoRequest> reqs;
        std::vector<AlignedBuffer> bufs;
        std::vector<iovec> iovs(n);
        std::vector<std::pair<uint64_t, uint64_t>> used;
        for (int k = 0; k < n; ++k) {
          const uint64_t len = (1 + rng.Below(rng.Below(4) == 0 ? 128 : 24)) * kBlock;
          const uint64_t off = rng.Below((P.span - len) / kBlock + 1) * kBlock;
          if (std::any_of(used.begin(), used.end(), [&](auto& u) {
                return off < u.first + u.second && u.first < off + len;
              })) {
            continue;
          }
          used.emplace_back(off, len);
          IoRequest r;
          const uint64_t kind = rng.Below(100);
          r.op = kind < 8 ? Op::kWriteZeroes : kind < 12 ? Op::kDiscard : Op::kWrite;
          r.offset = off;
          r.length = len;
          if (r.op == Op::kWrite) {
            bufs.emplace_back(len);
            FillMixed(rng, reinterpret_cast<unsigned char*>(bufs.back().data()), len);
            iovs[reqs.size()] = bufs.back().iov();
            r.iov = &iovs[reqs.size()];
            r.iovcnt = 1;
            if (rng.Below(10) == 0) r.flags = kIoFua;
          }
          reqs.push_back(r);
        }
        RunBatch(**q, reqs);
        size_t buf = 0;
        for (const IoRequest& r : reqs) {
          ASSERT_OK(r.status) << OpName(r.op) << " at " << r.offset;
          const unsigned char* data =
              r.op == Op::kWrite ? reinterpret_cast<const unsigned char*>(bufs[buf++].data()) : nullptr;
          for (uint64_t b = 0; b < r.length / kBlock; ++b) {
            const uint64_t h = data ? HashBlock(data + b * kBlock) : HashBlock(zero_block.data());
            history[r.offset / kBlock + b].emplace_back(step, h);
          }
        }
      }
      s.end = rec->events();
      steps.push_back(s);
    }
    (*q)->WaitIdle();
    q->reset();
    ASSERT_OK(dev->Close());  // a clean close is one more crash point: the last one
    log = rec->Log();         // `rec` goes with `dev`
    events = rec->events();
  }
  const std::vector<unsigned char> base(P.lower_size, 0);

  // Every crash point; the last one (events) is the clean close.
  const std::string reopen_layers = WithFormatOn(P.layers);
  for (uint64_t crash = 0; crash <= events; ++crash) {
    Rng coin(crash);
    const uint32_t tear = crash % 3 == 0 ? 0 : crash % 3 == 1 ? 512 : 4096;
    const std::vector<unsigned char> image =
        CrashImage(base, log, crash, crash == events ? nullptr : &coin, tear);
    auto reopened = OpenLayersOn(reopen_layers, MemoryWithImage(image));
    ASSERT_OK(reopened) << "crash at event " << crash << " of " << events;
    DevicePtr dev = std::move(*reopened);
    // The last flush that completed before the crash: everything before it is durable.
    int durable = -1;
    for (int i = 0; i < static_cast<int>(steps.size()); ++i) {
      if (steps[i].flush && steps[i].end <= crash) durable = i;
    }
    std::vector<unsigned char> data = ReadAll(*dev);
    for (uint64_t b = 0; b < blocks; ++b) {
      const uint64_t actual = HashBlock(&data[b * kBlock]);
      const auto& h = history[b];
      // Allowed: the value as of the durable flush, or any value written after it by a step
      // that had started before the crash.
      size_t first = 0;
      while (first + 1 < h.size() && h[first + 1].first < durable) ++first;
      bool ok = false;
      for (size_t k = first; k < h.size() && !ok; ++k) {
        if (k > first && steps[h[k].first].start >= crash) break;
        ok = h[k].second == actual;
      }
      ASSERT_TRUE(ok) << "crash at event " << crash << " of " << events << ": block " << b
                      << " (offset " << b * kBlock << ") holds a value never allowed (last durable"
                      << " flush: step " << durable << ")";
    }
    const CheckResult check = CheckStack(*dev);
    EXPECT_EQ(check.corruptions, 0u) << "crash at event " << crash << ": "
                                     << (check.messages.empty() ? "" : check.messages[0]);
    EXPECT_EQ(check.leaks, 0u) << "crash at event " << crash << ": "
                               << (check.messages.empty() ? "" : check.messages[0]);
    if (crash == events) {
      // A clean close loses nothing: every block holds its last value.
      for (uint64_t b = 0; b < blocks; ++b) {
        ASSERT_EQ(HashBlock(&data[b * kBlock]), history[b].back().second) << "block " << b;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layers, TransformCrash,
    ::testing::Values(CrashParam{"dedup", "dedup:size=2M", 4 << 20, 1 << 20},
                      CrashParam{"dedup_grain16k_verify", "dedup:grain=16K,verify=on,size=2M",
                                 4 << 20, 1 << 20},
                      CrashParam{"zstd", "zstd:size=2M", 4 << 20, 1 << 20},
                      CrashParam{"zstd_packed", "zstd:size=2M,rule=packed,open_bins=2", 4 << 20, 1 << 20},
                      CrashParam{"zstd_grain16k_vsan", "zstd:grain=16K,size=2M,rule=vsan-osa",
                                 4 << 20, 1 << 20},
                      CrashParam{"crc32c", "crc32c", 3 << 20, 1 << 20},
                      CrashParam{"dedup_zstd", "dedup:size=2M+zstd", 8 << 20, 1 << 20},
                      CrashParam{"crc32c_dedup_zstd", "crc32c+dedup+zstd", 10 << 20, 1 << 20}),
    [](const ::testing::TestParamInfo<CrashParam>& i) { return i.param.name; });

}  // namespace
}  // namespace vstack::testing
