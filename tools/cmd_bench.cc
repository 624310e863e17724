// vstack bench: run one workload through several stacks side by side, in interleaved rounds,
// and explain every gap layer by layer. With no --stack it runs the default matrix (raw,
// passthrough, fixed VHD, dynamic VHD allocated and fresh, dedup, zstd, dedup+zstd) on
// temporary files; stacks whose components are not in this build are skipped with a note.
//
// Ctrl-C (or SIGTERM) stops the run: what was measured is printed, temporary files are
// removed, and the exit status is 130. A second Ctrl-C kills at once.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "bench/anchors/anchors.h"
#include "bench/anchors/child_process.h"
#include "bench/workload/matrix.h"
#include "bench/workload/seed_presets.h"
#include "bench/workload/summary.h"
#include "blockdev/emulation/service_time.h"
#include "lib/registry.h"
#include "lib/size.h"
#include "lib/spec.h"
#include "tools/bench/foreign_args.h"
#include "tools/bench/report.h"
#include "tools/bench/report_dir.h"
#include "tools/command.h"
#include "tools/output.h"

namespace vstack::cli {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) {
  g_stop.store(true);
  signal(SIGINT, SIG_DFL);  // a second Ctrl-C kills at once
  signal(SIGTERM, SIG_DFL);
}

struct BenchArgs {
  std::vector<std::string> stacks;
  std::string bs = "8K", size = "256M", warmup = "0.5s";
  std::string duration;  // "": 2s, or the --preset's own
  std::string pattern = "random", distribution = "uniform", content = "random";
  std::string backend = "uring", direct = "on", prepare = "auto", cpu_sampling = "on";
  uint32_t write_pct = 50, qd = 8, threads = 4, flush_interval = 0, dedupe_pct = 0,
           compress_pct = 0;
  uint64_t ios = 0, seed = 1;
  std::string rounds;  // "": auto for the default matrix, 3 otherwise
  std::string precision = "2%", max_time = "2m";
  bool allow_write = false;
  std::string dir, report_dir;
  bool no_report = false, compare_qemu = false, qemu_create = false, compare_fio = false,
       quiet = false;
  OutputFormat output = OutputFormat::kText;
  std::string diskspd, fio_job;
  std::string command_line;
  // Seeds (docs/seeds.md): a seed preset, and CPU Ready with the quantum scheduler.
  std::string preset, quantum;
  std::vector<std::string> ready_stall = {"exp:4ms"};  // one, or one per --cpu-ready value
  std::vector<double> cpu_ready;
  uint32_t schedulers = 1;
  std::string task_cpu;
  bool exchange = false;
  std::string task_cpu_mode = "burn";
};

// The command line as typed, from /proc/self/cmdline.
std::string CommandLine() {
  std::FILE* f = std::fopen("/proc/self/cmdline", "rb");
  if (f == nullptr) return "vstack bench";
  std::vector<std::string> argv(1);
  for (int c; (c = std::fgetc(f)) != EOF;) {
    if (c == 0) {
      argv.emplace_back();
    } else {
      argv.back() += static_cast<char>(c);
    }
  }
  std::fclose(f);
  if (argv.back().empty()) argv.pop_back();
  return bench::ShellJoin(argv);
}

// "2", "2s", "500ms", "1.5m" -> seconds.
Result<double> ParseSeconds(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit = end ? end : "";
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  if (unit == "ms") scale = 1e-3;
  if (unit == "m" || unit == "min") scale = 60;
  if (end == text.c_str() || scale == 0 || !std::isfinite(v)) {
    return MakeError(Errc::kInvalidArgument,
                     flag + ": '" + text + "' is not a time (e.g. 2s, 500ms, 1m)");
  }
  return v * scale;
}

Result<uint32_t> ParseBlockSize(const std::string& text) {
  auto v = ParseSize(text);
  if (!v) return MakeError(Errc::kInvalidArgument, "--bs: " + v.error().message);
  if (*v > UINT32_MAX) return MakeError(Errc::kInvalidArgument, "--bs: " + text + " is too large");
  return static_cast<uint32_t>(*v);
}

Result<bool> ParseOnOff(const std::string& flag, const std::string& text) {
  if (text == "on") return true;
  if (text == "off") return false;
  return MakeError(Errc::kInvalidArgument, flag + ": '" + text + "' is neither on nor off");
}

// --cpu-ready, --quantum, --ready-stall, --schedulers: the quantum scheduler's knobs. Several
// --cpu-ready values make a sweep (one plan per value and stack, see SweepCpuReady).
Status ApplySchedulerArgs(const BenchArgs& a, bench::WorkloadKnobs* k) {
  if (!a.quantum.empty()) {
    VSTACK_ASSIGN_OR_RETURN(double q, ParseSeconds("--quantum", a.quantum));
    if (!(q > 0 && q <= 10)) {
      return MakeError(Errc::kInvalidArgument, "--quantum: '" + a.quantum + "' is not in (0, 10s]");
    }
    k->quantum_ns = static_cast<uint64_t>(q * 1e9);
  } else if (!a.cpu_ready.empty()) {
    k->quantum_ns = 4'000'000;  // SQLOS's quantum
  }
  if (a.cpu_ready.size() == 1) k->cpu_ready_pct = a.cpu_ready.front();
  for (double v : a.cpu_ready) {
    if (!(v >= 0 && v < 100)) {
      return MakeError(Errc::kInvalidArgument,
                       "--cpu-ready: " + fmt::format("{}", v) + " is not a percentage in [0, 100)");
    }
  }
  if (a.ready_stall.size() != 1 && a.ready_stall.size() != a.cpu_ready.size()) {
    return MakeError(Errc::kInvalidArgument,
                     "--ready-stall: give one stall length, or one per --cpu-ready value (" +
                         std::to_string(a.cpu_ready.size()) + ")");
  }
  for (const std::string& stall : a.ready_stall) {
    if (auto st = ServiceTime::Parse("--ready-stall", stall); !st) return st.error();
  }
  k->ready_stall = a.ready_stall.front();
  k->schedulers = a.schedulers;
  k->task_cpu = a.task_cpu;
  k->exchange = a.exchange;
  if (a.task_cpu_mode != "burn" && a.task_cpu_mode != "sleep") {
    return MakeError(Errc::kInvalidArgument,
                     "--task-cpu-mode: '" + a.task_cpu_mode + "' is neither burn nor sleep");
  }
  k->task_cpu_sleeps = a.task_cpu_mode == "sleep";
  return OkStatus();
}

// A --stack that is a path, as every other command takes it: an existing file becomes the spec
// its format probe gives (file:PATH or vhd+file:PATH), said on stderr; a path that does not
// exist is an error that shows the spec to create it. Presets and specs are returned as they are.
Result<std::string> StackOrPath(const std::string& text) {
  const auto presets = bench::PresetNames();
  if (std::find(presets.begin(), presets.end(), text) != presets.end() || IsStackSpec(text) ||
      text.find('/') == std::string::npos) {
    return text;
  }
  OpenOptions ro;
  ro.read_only = true;
  std::string spec;
  if (auto dev = OpenImage(text, ro, &spec); !dev) {
    return MakeError(Errc::kInvalidArgument,
                     "--stack " + text + ": " + dev.error().message +
                         "; to make a new image there, give a spec such as file:" + text +
                         ",create=on,size=1G");
  }
  std::fprintf(stderr, "vstack bench: --stack %s runs the stack %s\n", text.c_str(), spec.c_str());
  return spec;
}

// --rounds N, or --rounds auto with --precision and --max-time.
Status ApplyRoundArgs(const BenchArgs& a, bench::MatrixOptions* o) {
  const bool default_matrix = a.stacks.empty() && a.preset.empty();
  const std::string rounds = a.rounds.empty() ? (default_matrix ? "auto" : "3") : a.rounds;
  if (rounds == "auto") {
    o->auto_rounds = true;
    o->rounds = 1000;
    char* end = nullptr;
    const double p = std::strtod(a.precision.c_str(), &end);
    if (end == a.precision.c_str() || std::string(end) != "%" || !(p > 0 && p < 100)) {
      return MakeError(Errc::kInvalidArgument,
                       "--precision: '" + a.precision + "' is not a percentage such as 2%");
    }
    o->precision = p / 100;
    VSTACK_ASSIGN_OR_RETURN(o->max_time_s, ParseSeconds("--max-time", a.max_time));
    if (!(o->max_time_s > 0)) {
      return MakeError(Errc::kInvalidArgument, "--max-time: '" + a.max_time + "' is not > 0");
    }
    return OkStatus();
  }
  char* end = nullptr;
  const long n = std::strtol(rounds.c_str(), &end, 10);
  if (end == rounds.c_str() || *end != 0 || n < 1 || n > 1000) {
    return MakeError(Errc::kInvalidArgument, "--rounds: '" + rounds + "' is neither auto nor in 1..1000");
  }
  o->rounds = static_cast<int>(n);
  return OkStatus();
}

// vstack bench writes only into files it creates (issue 11): a stack the user names whose bottom
// device keeps data (a file, an RBD image...) and that is not a new file is opened read-only
// when the run only reads, and refused when it would write, unless --allow-write.
Status CheckWriteTargets(const BenchArgs& a, bench::Prepare prepare, bench::StackPlan* p) {
  auto parts = ParseSpec(p->spec);
  if (!parts || parts->empty() || p->spec.find("{dir}") != std::string::npos) return OkStatus();
  const SpecPart& bottom = parts->back();
  if (bottom.name == "memory" || bottom.name == "null") return OkStatus();
  bool create = false;
  for (const SpecOption& opt : bottom.options) create |= opt.key == "create" && opt.value == "on";
  const std::string& target = bottom.positional;
  if (create && !target.empty() && access(target.c_str(), F_OK) != 0) return OkStatus();
  if (a.allow_write) return OkStatus();
  const bool fills = prepare == bench::Prepare::kFill || prepare == bench::Prepare::kFresh;
  if (a.write_pct == 0 && !fills) {
    p->read_only = true;
    return OkStatus();
  }
  const std::string what = fills ? "--prepare " + std::string(bench::PrepareName(prepare)) +
                                       " writes all of it"
                                 : std::to_string(a.write_pct) + "% of the requests write";
  return MakeError(Errc::kInvalidArgument,
                   "--stack " + p->name + ": the benchmark would write into '" +
                       (target.empty() ? p->spec : target) +
                       "', which it did not create (" + what +
                       "), and its data would be lost. Nothing was written. Read only with "
                       "--write-pct 0, benchmark a scratch copy (a preset such as raw, or "
                       "{dir}/NAME,create=on,size=1G in the spec), or pass --allow-write to "
                       "overwrite it");
}

// Every knob checked before anything is created.
Result<bench::MatrixOptions> BuildOptions(const BenchArgs& a) {
  bench::MatrixOptions o;
  bench::WorkloadKnobs& k = o.knobs;
  VSTACK_ASSIGN_OR_RETURN(k.block_size, ParseBlockSize(a.bs));
  k.write_pct = a.write_pct;
  if (a.pattern == "random") {
    k.pattern = bench::AccessPattern::kRandom;
  } else if (a.pattern == "sequential") {
    k.pattern = bench::AccessPattern::kSequential;
  } else {
    return MakeError(Errc::kInvalidArgument,
                     "--pattern: '" + a.pattern + "' is neither random nor sequential");
  }
  k.queue_depth = a.qd;
  k.threads = a.threads;
  if (!a.duration.empty()) {
    VSTACK_ASSIGN_OR_RETURN(k.duration_s, ParseSeconds("--duration", a.duration));
  }
  k.io_count = a.ios;
  VSTACK_ASSIGN_OR_RETURN(k.warmup_s, ParseSeconds("--warmup", a.warmup));
  auto size = ParseSize(a.size);
  if (!size) return MakeError(Errc::kInvalidArgument, "--size: " + size.error().message);
  k.target_size = *size;
  k.seed = a.seed;
  VSTACK_RETURN_IF_ERROR(bench::ParseDistribution(a.distribution, &k));
  k.flush_interval = a.flush_interval;
  if (a.content == "random") {
    k.content = bench::Content::kRandom;
  } else if (a.content == "zeros") {
    k.content = bench::Content::kZeros;
  } else {
    return MakeError(Errc::kInvalidArgument, "--content: '" + a.content + "' is neither random nor zeros");
  }
  k.dedupe_pct = a.dedupe_pct;
  k.compress_pct = a.compress_pct;
  VSTACK_ASSIGN_OR_RETURN(k.sample_cpu, ParseOnOff("--cpu-sampling", a.cpu_sampling));
  std::optional<bench::SeedPreset> preset;
  if (!a.preset.empty()) {
    VSTACK_ASSIGN_OR_RETURN(preset, bench::FindSeedPreset(a.preset));
    bench::ApplySeedKnobs(&*preset, &k, !a.duration.empty());
  }
  VSTACK_RETURN_IF_ERROR(ApplySchedulerArgs(a, &k));
  VSTACK_RETURN_IF_ERROR(bench::ValidateKnobs(k));
  VSTACK_RETURN_IF_ERROR(ApplyRoundArgs(a, &o));

  bench::BackendChoice backend;
  if (a.backend != "uring" && a.backend != "file") {
    return MakeError(Errc::kInvalidArgument, "--backend: '" + a.backend + "' is neither uring nor file");
  }
  backend.backend = a.backend;
  VSTACK_ASSIGN_OR_RETURN(backend.direct, ParseOnOff("--direct", a.direct));
  VSTACK_ASSIGN_OR_RETURN(bench::Prepare prepare, bench::ParsePrepare(a.prepare));
  if (preset && !a.stacks.empty()) {
    return MakeError(Errc::kInvalidArgument, "--preset brings its own stacks: drop --stack");
  }
  if (preset) {
    o.stacks = preset->stacks;
  } else if (a.stacks.empty()) {
    o.stacks = bench::DefaultMatrix(backend);
  } else {
    for (const std::string& text : a.stacks) {
      VSTACK_ASSIGN_OR_RETURN(const std::string s, StackOrPath(text));
      VSTACK_ASSIGN_OR_RETURN(bench::StackPlan p, bench::ResolveStack(s, backend));
      // A preset writes only into images made for it (under {dir}, or tools/ceph-up's).
      const bool preset_plan = p.name != p.spec;
      if (p.image.empty() && !preset_plan) {
        VSTACK_RETURN_IF_ERROR(CheckWriteTargets(a, prepare, &p));
      }
      o.stacks.push_back(std::move(p));
    }
  }
  if (a.cpu_ready.size() > 1) {
    o.stacks = bench::SweepCpuReady(o.stacks, a.cpu_ready, a.ready_stall);
  }
  for (bench::StackPlan& p : o.stacks) {
    if (prepare != bench::Prepare::kAuto) p.prepare = prepare;
    if (!p.image.empty() && k.target_size == 0) {
      return MakeError(Errc::kInvalidArgument,
                       "--size: stack '" + p.name + "' makes its own image and needs a size > 0");
    }
  }
  if (std::string e = bench::CheckStackSizes(o.stacks, k); !e.empty()) {
    return MakeError(Errc::kInvalidArgument, e);
  }
  o.scratch_parent = a.dir;
  if (!a.dir.empty() && access(a.dir.c_str(), W_OK) != 0) {
    return MakeError(Errc::kInvalidArgument, "--dir: '" + a.dir + "' is not a writable directory");
  }
  return o;
}

// The live progress line on stderr: rewritten in place on a terminal, one line per stage
// otherwise.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled), tty_(isatty(2)) {}
  ~ProgressLine() { Clear(); }

  void Update(const bench::MatrixProgress& p) {
    if (!enabled_) return;
    const std::string round = p.rounds ? fmt::format("{}/{}", p.round + 1, p.rounds)
                                       : fmt::format("{}, auto", p.round + 1);
    std::string line = fmt::format("[round {}] {:<18} {}", round, p.stack, p.activity);
    const bool running = p.activity == "running" && p.run.elapsed_s > 0;
    if (running) {
      line += p.run.warming_up ? fmt::format("  {:.1f}/{:.1f} s  warming up", p.run.elapsed_s, p.run.total_s)
                               : p.run.total_s > 0
                                     ? fmt::format("  {:.1f}/{:.1f} s  {} IOPS", p.run.elapsed_s,
                                                   p.run.total_s, Num(p.run.iops))
                                     : fmt::format("  {:.1f} s  {} I/Os  {} IOPS", p.run.elapsed_s,
                                                   Num(double(p.run.ios)), Num(p.run.iops));
    }
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
      dirty_ = true;
    } else if (!running && line != last_) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    last_ = line;
    std::fflush(stderr);
  }

  void Clear() {
    if (dirty_) std::fprintf(stderr, "\r\033[K");
    dirty_ = false;
  }

 private:
  bool enabled_, tty_;
  bool dirty_ = false;
  std::string last_;
};

void RunBench(const BenchArgs& args) {
  auto options = BuildOptions(args);
  if (!options) FailUsage("bench", options.error().message);
  std::vector<std::unique_ptr<bench::Anchor>> anchors;
  if (args.compare_qemu) anchors.push_back(bench::MakeQemuAnchor());
  if (args.compare_fio) anchors.push_back(bench::MakeFioAnchor());
  if (args.qemu_create) {
    options->create_image = [](const bench::StackPlan& p, const std::string& path,
                               uint64_t size) -> Status {
      if (p.qemu_format.empty()) return CreateImage(p.image_format, path, size, p.image_options);
      return bench::CreateWithQemuImg(p, path, size, &g_stop);
    };
  }
  for (auto& a : anchors) options->anchors.push_back(a.get());

  g_stop.store(false);
  struct sigaction sa {};
  sa.sa_handler = &OnSignal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {}, old_term {};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  options->stop = &g_stop;

  BenchReport report;
  {
    ProgressLine progress(!args.quiet);
    options->on_progress = [&](const bench::MatrixProgress& p) { progress.Update(p); };
    report.result = bench::RunMatrix(*options);
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  report.command = args.command_line;
  report.preset = args.preset;
  report.summary = bench::Summarize(report.result);

  if (args.output == OutputFormat::kJson) {
    fmt::print("{}\n", RenderJson(report).dump(2));
  } else {
    fmt::print("{}", RenderText(report));
  }
  std::fflush(stdout);
  // Errors also go to stderr, whatever the output format.
  if (!report.result.error.empty()) {
    std::fprintf(stderr, "vstack bench: %s\n", report.result.error.c_str());
  }
  for (const bench::StackSummary& s : report.summary.stacks) {
    if (!s.error.empty()) std::fprintf(stderr, "vstack bench: %s: %s\n", s.name.c_str(), s.error.c_str());
  }
  if (const std::string w = bench::NoiseWarning(report.summary, report.result.precision_asked);
      report.result.auto_rounds && !w.empty()) {
    std::fprintf(stderr, "vstack bench: warning: %s\n", w.c_str());
  }
  if (const std::string w = CpuReadyWarning(report); !w.empty()) {
    std::fprintf(stderr, "vstack bench: warning: %s\n", w.c_str());
  }
  if (!args.report_dir.empty() && !args.no_report) {
    const std::string dir = args.report_dir;
    if (Status st = WriteReportDir(dir, report); !st) {
      std::fprintf(stderr, "vstack bench: %s\n", st.error().message.c_str());
    } else {
      std::fprintf(stderr, "vstack bench: report written to %s/index.html\n", dir.c_str());
    }
  }
  if (report.result.interrupted) Exit(130);
  if (!report.result.error.empty()) Exit(1);
  bool any_error = false, any_run = false;
  for (const bench::StackSummary& s : report.summary.stacks) {
    any_error = any_error || !s.error.empty();
    any_run = any_run || s.runs > 0;
  }
  if (any_error || !any_run) Exit(1);
}

// Sets the knobs a --diskspd or --fio-job translation gives, as if typed on the command line,
// and says on stderr what it ran as. Options typed on the command line win over the translation.
void ApplyForeign(CLI::App& cmd, BenchArgs& a) {
  if (a.diskspd.empty() && a.fio_job.empty()) return;
  const std::string from =
      a.diskspd.empty() ? "--fio-job " + a.fio_job : "--diskspd \"" + a.diskspd + "\"";
  auto translate = [&]() -> Result<ForeignArgs> {
    if (!a.diskspd.empty()) return TranslateDiskspd(a.diskspd);
    std::ifstream f(a.fio_job);
    if (!f) Fail("bench", "--fio-job: cannot read '" + a.fio_job + "'");
    std::stringstream text;
    text << f.rdbuf();
    return TranslateFioJob(text.str());
  };
  Result<ForeignArgs> t = translate();
  if (!t) FailUsage("bench", t.error().message);
  std::vector<std::string> kept, translated;
  auto has = [](const std::vector<std::string>& v, const std::string& k) {
    return std::find(v.begin(), v.end(), k) != v.end();
  };
  for (const auto& [knob, value] : t->knobs) {
    CLI::Option* opt = cmd.get_option(knob);
    if (has(kept, knob)) continue;
    if (opt->count() > 0 && !has(translated, knob)) {
      kept.push_back(knob);
      continue;
    }
    translated.push_back(knob);
    try {
      opt->clear();
      opt->add_result(value);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      FailUsage("bench", from + " gives " + knob + " " + value + ": " + e.what());
    }
  }
  std::string stacks;
  if (!t->targets.empty() && a.stacks.empty()) {
    a.stacks = t->targets;
    for (const std::string& s : t->targets) stacks += " --stack " + s;
  }
  std::string line = "vstack bench: " + from + " runs as " + KnobsText(*t) + stacks;
  for (const std::string& k : kept) line += "; " + k + " as given on the command line";
  for (const std::string& n : t->notes) line += "; " + n;
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

void AddBenchCommand(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Run one workload through several stacks side by side (interleaved rounds, medians) and "
      "explain every gap layer by layer. Without --stack: the default matrix on temporary files.");
  cmd->add_option(
      "--stack", a->stacks,
      "a preset (" +
          [] {
            std::string s;
            for (const std::string& n : bench::PresetNames()) s += (s.empty() ? "" : ", ") + n;
            return s;
          }() +
          "), a stack spec, or an existing image file; repeatable; {dir} in a spec is the scratch "
          "directory");
  cmd->add_option("--bs", a->bs, "block size per request")->capture_default_str();
  cmd->add_option("--write-pct", a->write_pct, "percent of requests that write (0..100)")->capture_default_str();
  cmd->add_option("--pattern", a->pattern, "random or sequential")->capture_default_str();
  cmd->add_option("--qd", a->qd, "outstanding requests per thread")->capture_default_str();
  cmd->add_option("--threads", a->threads, "threads, each with its own queue")->capture_default_str();
  cmd->add_option("--duration", a->duration,
                  "measured time per run (e.g. 2s, 500ms); default 2s, or the --preset's own");
  cmd->add_option("--ios", a->ios, "measured I/Os per run instead of a duration (0: timed)")->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "unmeasured warm-up per run")->capture_default_str();
  cmd->add_option("--size", a->size, "bytes exercised from offset 0 (and the size of created images)")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "RNG seed (round r uses seed + r)")->capture_default_str();
  cmd->add_option("--distribution", a->distribution, "uniform or zipf:THETA (random pattern)")
      ->capture_default_str();
  cmd->add_option("--flush-interval", a->flush_interval, "a flush after every N writes per thread (0: none)")
      ->capture_default_str();
  cmd->add_option("--content", a->content, "write buffers: random or zeros")->capture_default_str();
  cmd->add_option("--dedupe-pct", a->dedupe_pct, "percent of writes repeating earlier data")->capture_default_str();
  cmd->add_option("--compress-pct", a->compress_pct, "percent of each 4 KiB chunk that compresses away")
      ->capture_default_str();
  cmd->add_option("--rounds", a->rounds,
                  "interleaved rounds, or auto: add rounds until every ratio's 95% interval is "
                  "within --precision or --max-time is spent (at least 3). Default: auto for the "
                  "default matrix, 3 otherwise");
  cmd->add_option("--precision", a->precision, "--rounds auto: the interval half-width to reach")
      ->capture_default_str();
  cmd->add_option("--max-time", a->max_time, "--rounds auto: the wall-time budget of the run")
      ->capture_default_str();
  cmd->add_flag("--allow-write", a->allow_write,
                "let the workload (and --prepare fill) write into an image or device you name; "
                "RISK: its data is overwritten. Without it, a named image is only read "
                "(--write-pct 0) or refused");
  cmd->add_option("--backend", a->backend, "backend of the presets' image files: uring or file")
      ->capture_default_str();
  cmd->add_option("--direct", a->direct, "O_DIRECT for the presets' image files: on or off")->capture_default_str();
  cmd->add_option("--prepare", a->prepare,
                  "auto (each stack's own), fill (write everything first), fresh (new image every "
                  "round), none")
      ->capture_default_str();
  cmd->add_option("--dir", a->dir, "where temporary images go (default: $TMPDIR or /var/tmp)");
  cmd->add_option("--report-dir", a->report_dir,
                  "write the report folder (index.html, report.json, SVG charts) here; none "
                  "without it")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_flag("--no-report", a->no_report, "do not write the report folder (even with --report-dir)");
  cmd->add_flag("--compare-qemu", a->compare_qemu,
                "also run qemu-img bench on the same image files (raw, vpc) every round");
  cmd->add_flag("--qemu-create", a->qemu_create,
                "create the images qemu can open (raw, vpc) with `qemu-img create` instead of "
                "vstack, so vstack and --compare-qemu both start from qemu's own image");
  cmd->add_flag("--compare-fio", a->compare_fio, "also run fio with the same knobs on the raw file (or, for an rbd: stack, the RBD image with fio's rbd engine) every round");
  cmd->add_flag("--quiet", a->quiet, "no live progress line");
  cmd->add_option("--preset", a->preset, "reproduce a published finding (docs/seeds.md): hyperv-passthrough, kvm-vs-hyperv");
  cmd->add_option("--cpu-ready", a->cpu_ready,
                  "RDY%: stall each scheduler this share of wall time (quantum scheduler on); "
                  "several values (1.2,5.1,28.4) sweep")
      ->delimiter(',');
  cmd->add_option("--quantum", a->quantum, "cooperative scheduler quantum of wall time (default 4ms "
                                           "with --cpu-ready)");
  cmd->add_option("--ready-stall", a->ready_stall, "CPU Ready stall length: 4ms, exp:MEAN, "
                                                   "uniform:MIN:MAX, lognormal:MEAN:SD; one per "
                                                   "--cpu-ready value to grow with the load")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--schedulers", a->schedulers, "schedulers (vCPUs) the threads share")
      ->capture_default_str();
  cmd->add_option("--task-cpu", a->task_cpu,
                  "CPU each thread works on its scheduler before each I/O, checking its quantum "
                  "every 100us (real work): 700us, exp:MEAN, ...; needs --cpu-ready or --quantum");
  cmd->add_option("--task-cpu-mode", a->task_cpu_mode,
                  "burn: --task-cpu is real CPU on the thread; sleep: the thread holds its "
                  "scheduler that long asleep (more schedulers than this machine has cores)")
      ->capture_default_str();
  cmd->add_option("--cpu-sampling", a->cpu_sampling,
                  "sample each thread's CPU by layer for the per-layer CPU (on), or not (off: only "
                  "to measure what the sampling costs)")
      ->capture_default_str();
  cmd->add_flag("--exchange", a->exchange,
                "the threads run as one parallel query: each thread's next I/O waits until every "
                "thread has finished its current one (a parallel plan's exchange; needs --qd 1)");
  auto* diskspd = cmd->add_option(
      "--diskspd", a->diskspd,
      "a diskspd command line's parameters, e.g. \"-b8K -d60 -o8 -t4 -r -w50 -L\", run as "
      "vstack bench's knobs (the translation is printed; what has no equivalent is refused)");
  cmd->add_option("--fio-job", a->fio_job,
                  "a fio job file (one job), run as vstack bench's knobs, like --diskspd")
      ->excludes(diskspd);
  AddOutputOption(cmd, &a->output);
  cmd->callback([a, cmd] {
    a->command_line = CommandLine();
    ApplyForeign(*cmd, *a);
    RunBench(*a);
  });
}

}  // namespace vstack::cli
