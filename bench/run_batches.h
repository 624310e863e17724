// The Google Benchmark suites' timed loop over a QueueDriver: one definition of how a suite runs
// batches of I/O, stops on the first error and reports items (requests) and bytes.
#ifndef VSTACK_BENCH_RUN_BATCHES_H_
#define VSTACK_BENCH_RUN_BATCHES_H_

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <system_error>

namespace vstack::bench {

// Runs `driver.Run(batch)` until the benchmark has its iterations (one iteration = one request),
// then reports items and `bytes_per_item` bytes per request. The first I/O error ends the
// benchmark with "I/O error: <message>" (the run is then skipped, not timed).
// REQUIRES: `driver` has a `std::error_code Run(uint64_t n)` issuing exactly n requests.
template <typename Driver>
void RunBatches(benchmark::State& state, Driver& driver, uint64_t batch, uint64_t bytes_per_item) {
  while (state.KeepRunningBatch(static_cast<benchmark::IterationCount>(batch))) {
    if (std::error_code ec = driver.Run(batch)) {
      state.SkipWithError(("I/O error: " + ec.message()).c_str());
      return;
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes_per_item));
}

}  // namespace vstack::bench

#endif  // VSTACK_BENCH_RUN_BATCHES_H_
