#include "bench/anchors/anchors.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>

#include "bench/anchors/child_process.h"
#include "bench/workload/image_setup.h"
#include "lib/spec.h"

namespace vstack::bench {
namespace {

// The output's last lines, for error messages.
std::string Tail(const std::string& s) {
  const size_t from = s.size() > 600 ? s.size() - 600 : 0;
  std::string t = s.substr(from);
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

// The backend at the bottom of `spec` and whether it uses O_DIRECT: what the tools must match.
struct BottomBackend {
  bool uring = true;
  bool direct = false;
};
BottomBackend BottomOf(const std::string& spec) {
  BottomBackend b;
  auto parts = ParseSpec(spec);
  if (!parts || parts->empty()) return b;
  b.uring = parts->back().name == "uring";
  for (const SpecOption& o : parts->back().options) {
    if (o.key == "direct") b.direct = o.value == "on" || o.value == "true" || o.value == "yes" || o.value == "1";
  }
  return b;
}

Result<ChildResult> RunTool(const std::vector<std::string>& argv, const std::atomic<bool>* stop) {
  VSTACK_ASSIGN_OR_RETURN(ChildResult r, RunChild(argv, stop));
  if (r.stopped) return MakeError(Errc::kCancelled, argv[0] + " interrupted");
  if (r.exit_status != 0) {
    return MakeError(Errc::kIo, fmt::format("{} failed (exit status {}): {}", argv[0],
                                            r.exit_status, Tail(r.output)));
  }
  return r;
}

class QemuAnchor final : public Anchor {
 public:

  std::string name() const override { return "qemu-img bench"; }
  bool AppliesTo(const StackPlan& plan) const override { return !plan.qemu_format.empty(); }

  Result<AnchorResult> Run(const AnchorJob& job) override {
    const WorkloadKnobs& k = job.knobs;
    const BottomBackend bottom = BottomOf(job.plan->spec);
    std::string image = job.image;
    if (job.make_fresh_image) {  // an identical fresh copy of what vstack started from
      image = job.scratch_dir + "/qemu-fresh-" + std::to_string(job.knobs.seed);
      VSTACK_RETURN_IF_ERROR(job.make_fresh_image(image));
    }
    const uint64_t vstack_ios = std::max<uint64_t>(job.vstack->Total().ios, 1000);
    const uint64_t want_writes = vstack_ios * k.write_pct / 100;
    const uint64_t blocks = std::max<uint64_t>(job.vstack->region_bytes / k.block_size, 1);
    const uint64_t step = k.pattern == AccessPattern::kRandom ? ScatterStride(blocks, k.block_size)
                                                                     : k.block_size;
    // Bounded by time: each pass gets about vstack's window (at least 1 s) at qemu's own rate,
    // known from the previous round of this stack or from a short calibration run.
    const double budget_s = std::max(1.0, k.duration_s);
    AnchorResult out;
    double seconds = 0, cpu = 0;
    uint64_t ios = 0;
    bool capped = false;
    std::string commands;
    auto argv_for = [&](bool write, uint64_t count, const std::string& file) {
      std::vector<std::string> argv = {
          "qemu-img", "bench", "-f", job.plan->qemu_format, "-t", bottom.direct ? "none" : "writeback",
          "-i", bottom.uring ? "io_uring" : "threads", "-d",
          std::to_string(k.threads * k.queue_depth), "-s", std::to_string(k.block_size),
          "-S", std::to_string(step), "-c", std::to_string(count), "--pattern=165"};
      if (write) argv.push_back("-w");
      if (write && k.flush_interval) {
        argv.push_back("--flush-interval=" + std::to_string(k.flush_interval));
        argv.push_back("--no-drain");
      }
      argv.push_back(file);
      return argv;
    };
    auto run = [&](const std::vector<std::string>& argv) -> Result<std::pair<double, double>> {
      VSTACK_ASSIGN_OR_RETURN(ChildResult r, RunTool(argv, job.stop));
      const size_t at = r.output.find("Run completed in ");
      if (at == std::string::npos) {
        return MakeError(Errc::kIo, "qemu-img bench printed no run time: " + Tail(r.output));
      }
      return std::make_pair(std::strtod(r.output.c_str() + at + 17, nullptr), r.user_s + r.kernel_s);
    };
    for (bool write : {false, true}) {  // reads first: on a fresh image they see no data yet
      const uint64_t want = write ? want_writes : vstack_ios - want_writes;
      if (want == 0) continue;
      const std::string key = job.plan->name + (write ? "/w" : "/r");
      if (!rate_.count(key)) {  // calibrate on a copy of its own where the image starts fresh
        std::string file = image;
        if (job.make_fresh_image) {
          file = job.scratch_dir + "/qemu-calibration";
          VSTACK_RETURN_IF_ERROR(job.make_fresh_image(file));
        }
        const uint64_t n = std::min<uint64_t>(want, 500);
        VSTACK_ASSIGN_OR_RETURN(auto c, run(argv_for(write, n, file)));
        if (job.make_fresh_image) (void)RemoveFile(file);
        rate_[key] = c.first > 0 ? double(n) / c.first : 1e9;
      }
      const uint64_t bound = static_cast<uint64_t>(std::max(500.0, rate_[key] * budget_s));
      const uint64_t count = std::min(want, bound);
      capped = capped || count < want;
      const std::vector<std::string> argv = argv_for(write, count, image);
      VSTACK_ASSIGN_OR_RETURN(auto res, run(argv));
      if (res.first > 0) rate_[key] = double(count) / res.first;
      seconds += res.first;
      cpu += res.second;
      ios += count;
      commands += (commands.empty() ? "" : " && ") + ShellJoin(argv);
    }
    const uint64_t writes = want_writes, reads = vstack_ios - want_writes;
    if (job.make_fresh_image) (void)RemoveFile(image);
    out.command = commands;
    out.seconds = seconds;
    out.ios = ios;
    out.iops = seconds > 0 ? double(ios) / seconds : 0;
    out.mib_s = seconds > 0 ? double(ios) * k.block_size / seconds / (1 << 20) : 0;
    out.cpu_s = cpu;
    out.capped = capped;
    std::string note = "qemu-img bench: one thread, depth " +
                       std::to_string(k.threads * k.queue_depth) + ", " + std::to_string(ios) +
                       " requests (vstack did " + std::to_string(job.vstack->Total().ios) +
                       (capped ? fmt::format("; qemu's passes capped to about {:g} s each at the rate "
                                             "it showed before", budget_s)
                               : std::string()) + ")";
    if (k.pattern == AccessPattern::kRandom) {
      note += "; random offsets emulated by a scattering stride of " + std::to_string(step) + " bytes";
    }
    if (reads && writes) note += "; the mix runs as a read pass then a write pass";
    if (k.distribution == Distribution::kZipf) note += "; zipf not available (uniform stride)";
    note += "; CPU includes opening the image; no latency percentiles";
    out.note = note;
    return out;
  }
 private:
  std::map<std::string, double> rate_;  // plan/op -> qemu's IOPS in its last run
};

class FioAnchor final : public Anchor {
 public:

  std::string name() const override { return "fio"; }
  bool AppliesTo(const StackPlan& plan) const override {
    return plan.raw_file || RbdImage(plan.spec);
  }

  // fio's rbd engine on the image when `spec` is one rbd: backend; fio finds the cluster as
  // librados does ($CEPH_CONF), like the backend without conf=.
  static std::optional<SpecPart> RbdImage(const std::string& spec) {
    auto parts = ParseSpec(spec);
    if (!parts || parts->size() != 1 || parts->front().name != "rbd") return std::nullopt;
    return parts->front();
  }
  static void UseRbdEngine(const SpecPart& rbd, std::vector<std::string>& argv) {
    std::erase_if(argv, [](const std::string& a) {
      return a.starts_with("--filename=") || a.starts_with("--ioengine=") ||
             a.starts_with("--direct=") || a == "--fixedbufs=1" || a == "--registerfiles=1" ||
             a == "--allow_file_create=0";
    });
    const size_t slash = rbd.positional.find('/');
    std::string client = "admin";
    for (const SpecOption& o : rbd.options) {
      if (o.key == "id") client = o.value;
    }
    argv.push_back("--ioengine=rbd");
    argv.push_back("--pool=" + rbd.positional.substr(0, slash));
    argv.push_back("--rbdname=" + rbd.positional.substr(slash + 1));
    argv.push_back("--clientname=" + client);
  }

  Result<AnchorResult> Run(const AnchorJob& job) override {
    const WorkloadKnobs& k = job.knobs;
    const BottomBackend bottom = BottomOf(job.plan->spec);
    const bool random = k.pattern == AccessPattern::kRandom;
    const char* rw = k.write_pct == 0 ? (random ? "randread" : "read")
                     : k.write_pct == 100 ? (random ? "randwrite" : "write")
                                          : (random ? "randrw" : "rw");
    const uint64_t region = job.vstack->region_bytes;
    std::vector<std::string> argv = {
        "fio", "--name=vstack-anchor", "--filename=" + job.image,
        "--bs=" + std::to_string(k.block_size), std::string("--rw=") + rw,
        "--rwmixwrite=" + std::to_string(k.write_pct), "--iodepth=" + std::to_string(k.queue_depth),
        "--numjobs=" + std::to_string(k.threads), "--thread", "--group_reporting",
        std::string("--ioengine=") + (bottom.uring ? "io_uring" : "psync"),
        std::string("--direct=") + (bottom.direct ? "1" : "0"), "--norandommap", "--randrepeat=0",
        "--randseed=" + std::to_string(k.seed), "--lat_percentiles=1",
        "--percentile_list=50:99:99.9", "--output-format=json", "--allow_file_create=0"};
    if (bottom.uring) {
      argv.push_back("--fixedbufs=1");
      argv.push_back("--registerfiles=1");
    }
    if (random) {
      argv.push_back("--size=" + std::to_string(region));
      if (k.distribution == Distribution::kZipf) {
        argv.push_back(fmt::format("--random_distribution=zipf:{:g}", k.zipf_theta));
      }
    } else {  // each thread from its own start, as vstack's sequential threads
      const uint64_t share = region / k.threads / k.block_size * k.block_size;
      argv.push_back("--size=" + std::to_string(share));
      argv.push_back("--offset_increment=" + std::to_string(share));
    }
    if (k.io_count) {
      argv.push_back("--number_ios=" + std::to_string((k.io_count + k.threads - 1) / k.threads));
      // Bounded by time as well: at most 4x vstack's window (at least 2 s).
      const double cap_s = std::max(2.0, 4 * (job.vstack ? job.vstack->seconds : 0.0));
      argv.push_back(fmt::format("--runtime={}ms", std::llround(cap_s * 1000)));
    } else {
      argv.push_back("--time_based");
      argv.push_back(fmt::format("--runtime={}ms", std::llround(k.duration_s * 1000)));
    }
    if (k.warmup_s > 0) argv.push_back(fmt::format("--ramp_time={}ms", std::llround(k.warmup_s * 1000)));
    if (k.flush_interval) argv.push_back("--fsync=" + std::to_string(k.flush_interval));
    if (k.content == Content::kZeros) {
      argv.push_back("--zero_buffers");
    } else if (k.content == Content::kPattern) {
      std::string bytes = "--buffer_pattern=0x";  // 0x000102...ff: the same 256 bytes repeating
      for (int b = 0; b < 256; ++b) bytes += fmt::format("{:02x}", b);
      argv.push_back(bytes);
      argv.push_back("--scramble_buffers=0");
    } else {
      argv.push_back("--refill_buffers");
      if (k.compress_pct) argv.push_back("--buffer_compress_percentage=" + std::to_string(k.compress_pct));
      if (k.dedupe_pct) argv.push_back("--dedupe_percentage=" + std::to_string(k.dedupe_pct));
    }
    if (auto rbd = RbdImage(job.plan->spec)) UseRbdEngine(*rbd, argv);
    VSTACK_ASSIGN_OR_RETURN(ChildResult r, RunTool(argv, job.stop));
    const size_t brace = r.output.find('{');
    const auto doc = nlohmann::json::parse(brace == std::string::npos ? "" : r.output.substr(brace),
                                           nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.contains("jobs") || doc["jobs"].empty()) {
      return MakeError(Errc::kIo, "fio printed no JSON results: " + Tail(r.output));
    }
    const nlohmann::json& j = doc["jobs"][0];
    AnchorResult out;
    out.command = ShellJoin(argv);
    const double rd_ios = j["read"].value("total_ios", 0.0), wr_ios = j["write"].value("total_ios", 0.0);
    out.ios = static_cast<uint64_t>(rd_ios + wr_ios);
    out.iops = j["read"].value("iops", 0.0) + j["write"].value("iops", 0.0);
    out.mib_s = (j["read"].value("bw_bytes", 0.0) + j["write"].value("bw_bytes", 0.0)) / (1 << 20);
    out.seconds = out.iops > 0 ? double(out.ios) / out.iops : 0;
    // Latency over reads and writes together: the percentile of the side with more I/Os is the
    // closer one; fio gives no merged percentiles, so report the I/O-weighted mean of the two.
    auto pct = [&](const char* key) {
      double sum = 0, weight = 0;
      for (const char* side : {"read", "write"}) {
        const auto& s = j[side];
        const double n = s.value("total_ios", 0.0);
        if (n <= 0 || !s.contains("lat_ns") || !s["lat_ns"].contains("percentile")) continue;
        sum += n * s["lat_ns"]["percentile"].value(key, 0.0) / 1000;
        weight += n;
      }
      return weight > 0 ? sum / weight : -1.0;
    };
    out.p50_us = pct("50.000000");
    out.p99_us = pct("99.000000");
    out.cpu_s = (j.value("usr_cpu", 0.0) + j.value("sys_cpu", 0.0)) / 100 *
                j.value("job_runtime", 0.0) / 1000;
    out.note = "fio: same knobs; write content by fio's own generator";
    if (k.write_pct != 0 && k.write_pct != 100) {
      out.note += "; p50/p99 are the I/O-weighted mean of fio's read and write percentiles";
    }
    return out;
  }
};

}  // namespace

uint64_t ScatterStride(uint64_t blocks, uint32_t bs) {
  if (blocks <= 2) return bs;
  // qemu-img bench takes a step below 2 GiB (an int): in a larger image the stride is about
  // 0.618 of 2 GiB instead, still coprime, so each pass still visits every block once.
  const uint64_t span = std::min<uint64_t>(blocks, (uint64_t{INT32_MAX} / bs) | 1);
  uint64_t s = static_cast<uint64_t>(double(span) * 0.6180339887498949) | 1;
  while (std::gcd(s, blocks) != 1) s += 2;
  return (s % blocks) * bs;
}

Status CreateWithQemuImg(const StackPlan& plan, const std::string& path, uint64_t size,
                         const std::atomic<bool>* stop) {
  if (plan.qemu_format.empty()) {
    return MakeError(Errc::kNotSupported, "qemu-img cannot create the image of " + plan.name);
  }
  std::vector<std::string> argv = {"qemu-img", "create", "-q", "-f", plan.qemu_format};
  if (!plan.image_options.empty()) {  // the same spelling: subformat=fixed|dynamic
    argv.push_back("-o");
    argv.push_back(plan.image_options);
  }
  argv.push_back(path);
  argv.push_back(std::to_string(size));
  auto r = RunTool(argv, stop);
  if (!r) return std::move(r).error();
  return OkStatus();
}

std::unique_ptr<Anchor> MakeQemuAnchor() { return std::make_unique<QemuAnchor>(); }

std::unique_ptr<Anchor> MakeFioAnchor() { return std::make_unique<FioAnchor>(); }

}  // namespace vstack::bench
