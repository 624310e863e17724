// Example 3: a `vstack bench`-style comparison from C++. Three stacks run the same workload in
// interleaved rounds through the workload engine (vstack/workload/matrix.h); the example prints
// each stack's IOPS and, per layer, what the layer did and cost per guest I/O (attribution.h).
//
//   compare_stacks [SPEC...]   (default: memory:64M passthrough+memory:64M zstd+memory:64M)
#include <cstdio>
#include <string>
#include <vector>

#include <vstack/workload/attribution.h>
#include <vstack/workload/matrix.h>

int main(int argc, char** argv) {
  std::vector<std::string> specs(argv + 1, argv + argc);
  if (specs.empty()) specs = {"memory:64M", "passthrough+memory:64M", "zstd+memory:64M"};

  vstack::bench::MatrixOptions options;
  options.knobs.block_size = 4096;
  options.knobs.write_pct = 50;
  options.knobs.threads = 1;
  options.knobs.queue_depth = 4;
  options.knobs.target_size = 16ull << 20;
  options.knobs.duration_s = 0.3;
  options.knobs.warmup_s = 0.1;
  options.knobs.compress_pct = 50;  // half of each 4 KiB chunk is zeros: zstd has work to do
  options.rounds = 2;
  if (vstack::Status s = vstack::bench::ValidateKnobs(options.knobs); !s) {
    std::fprintf(stderr, "compare_stacks: %s\n", s.error().ToString().c_str());
    return 1;
  }
  for (const std::string& spec : specs) {
    auto plan = vstack::bench::ResolveStack(spec, {});
    if (!plan) {
      std::fprintf(stderr, "compare_stacks: %s\n", plan.error().ToString().c_str());
      return 1;
    }
    options.stacks.push_back(*plan);
  }

  std::printf("workload: %s, %d rounds\n", vstack::bench::DescribeWorkload(options.knobs).c_str(),
              options.rounds);
  vstack::bench::MatrixResult result = vstack::bench::RunMatrix(options);
  if (!result.error.empty()) {
    std::fprintf(stderr, "compare_stacks: %s\n", result.error.c_str());
    return 1;
  }
  for (const vstack::bench::StackOutcome& stack : result.stacks) {
    if (!stack.error.empty() || !stack.skipped.empty() || stack.rounds.empty()) {
      std::fprintf(stderr, "compare_stacks: %s: %s%s\n", stack.plan.name.c_str(),
                   stack.error.c_str(), stack.skipped.c_str());
      return 1;
    }
    std::vector<const vstack::bench::RunResult*> runs;
    double iops = 0;
    for (const auto& r : stack.rounds) {
      runs.push_back(&r);
      iops += vstack::bench::Metrics(r).iops / stack.rounds.size();
    }
    vstack::bench::Attribution a =
        vstack::bench::Attribute(vstack::bench::MergeLayerDeltas(runs));
    std::printf("\n%s: %.0f IOPS (mean of %zu rounds), %.2f us/IO in layers above the backend\n",
                stack.plan.name.c_str(), iops, stack.rounds.size(), a.layers_us_per_io);
    std::printf("  %-12s %10s %10s %12s  %s\n", "layer", "in/IO", "out/IO", "self us/IO",
                "counters per IO");
    for (const vstack::bench::LayerCost& layer : a.layers) {
      std::string counters;
      for (const auto& c : layer.counters) {
        char item[96];
        std::snprintf(item, sizeof item, "%s%s=%.3f", counters.empty() ? "" : ", ",
                      c.name.c_str(), c.per_io);
        counters += item;
      }
      // A self time below the timestamp resolution (one clock read per batch) is not a 0.
      char self[32];
      std::snprintf(self, sizeof self, "%s", a.timed ? "< resolution" : "not timed");
      if (layer.self_resolved) std::snprintf(self, sizeof self, "%.3f", layer.self_us_per_io);
      std::printf("  %-12s %10.3f %10.3f %12s  %s\n", layer.kind.c_str(), layer.in_total,
                  layer.out_total, self, counters.c_str());
    }
  }
  return 0;
}
