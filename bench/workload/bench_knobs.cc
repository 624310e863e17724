// PlanBench (bench_knobs.h): every knob of vstack bench checked, and the matrix it asks for.
#include "bench/workload/bench_knobs.h"

#include <sys/stat.h>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <optional>

#include "bench/workload/presets.h"
#include "bench/workload/write_guard.h"
#include "blockdev/emulation/service_time.h"
#include "lib/duration.h"
#include "lib/registry.h"
#include "lib/size.h"
#include "lib/suggest.h"

namespace vstack::bench {
namespace {

Error Bad(const std::string& message) { return MakeError(Errc::kInvalidArgument, message); }

// "2", "2s", "500ms", "1.5m" -> seconds. A negative time parses, for the knob's range check to
// refuse with its range ("--duration: -1 s is not in (0, 86400] s").
Result<double> ParseSeconds(const std::string& flag, const std::string& text) {
  const bool negative = !text.empty() && text[0] == '-';
  auto ns = ParseDuration(negative ? text.substr(1) : text, BareNumber::kSeconds);
  if (!ns) return Bad(flag + ": '" + text + "' is not a time (e.g. 2s, 500ms, 1m)");
  return (negative ? -1 : 1) * double(*ns) / 1e9;
}

Result<uint32_t> ParseBlockSize(const std::string& text) {
  auto v = ParseSize(text);
  if (!v) return Bad("--bs: " + v.error().message);
  if (*v > UINT32_MAX) return Bad("--bs: " + text + " is too large");
  return static_cast<uint32_t>(*v);
}

// A knob of two words: true for `first`, false for `second`, else the error that names both
// ("--backend: 'spdk' is neither uring nor file").
Result<bool> IsFirstOf(const std::string& flag, const std::string& text, const char* first,
                       const char* second) {
  if (text == first) return true;
  if (text == second) return false;
  return Bad(flag + ": '" + text + "' is neither " + first + " nor " + second);
}

// The index of `text` in `choices`, else the error the command line's choice options give
// ("--pattern: 'randon' is not one of random|sequential; did you mean `random`?").
Result<size_t> OneOf(const std::string& flag, const std::string& text,
                     const std::vector<std::string>& choices) {
  for (size_t i = 0; i < choices.size(); ++i) {
    if (text == choices[i]) return i;
  }
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : "|") + c;
  return Bad(flag + ": '" + text + "' is not one of " + list + DidYouMean(text, choices));
}

// `v` as the command line prints a number it parsed: the shortest digits that read back as `v`,
// in exponent form below 1e-4 and from 1e16 on (fmt's "{}").
std::string ShortestDecimal(double v) {
  char buf[64];
  auto sci = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string s(buf, sci.ptr);
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;  // nan, inf
  const int exponent = std::stoi(s.substr(e + 1));
  if (exponent < -4 || exponent >= 16) return s;
  auto fixed = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, fixed.ptr);
}

// --cpu-ready, --quantum, --ready-stall, --schedulers, --task-cpu: the quantum scheduler's
// knobs. Several --cpu-ready values make a sweep (one plan per value and stack, SweepCpuReady).
Status ApplySchedulerKnobs(const BenchKnobs& a, WorkloadKnobs* k) {
  if (!a.quantum.empty()) {
    VSTACK_ASSIGN_OR_RETURN(double q, ParseSeconds("--quantum", a.quantum));
    if (!(q > 0 && q <= 10)) return Bad("--quantum: '" + a.quantum + "' is not in (0, 10s]");
    k->quantum_ns = static_cast<uint64_t>(q * 1e9);
  } else if (!a.cpu_ready.empty()) {
    k->quantum_ns = 4'000'000;  // SQLOS's quantum
  }
  if (a.cpu_ready.size() == 1) k->cpu_ready_pct = a.cpu_ready.front();
  for (double v : a.cpu_ready) {
    if (!(v >= 0 && v < 100)) {
      return Bad("--cpu-ready: " + ShortestDecimal(v) + " is not a percentage in [0, 100)");
    }
  }
  if (a.ready_stall.size() != 1 && a.ready_stall.size() != a.cpu_ready.size()) {
    return Bad("--ready-stall: give one stall length, or one per --cpu-ready value (" +
               std::to_string(a.cpu_ready.size()) + ")");
  }
  for (const std::string& stall : a.ready_stall) {
    if (auto st = ServiceTime::Parse("--ready-stall", stall); !st) {
      return MakeError(Errc::kInvalidArgument, st.error().message);  // a knob's, as Bad() says
    }
  }
  k->ready_stall = a.ready_stall.front();
  k->schedulers = a.schedulers;
  k->task_cpu = a.task_cpu;
  k->exchange = a.exchange;
  VSTACK_ASSIGN_OR_RETURN(const bool burns,
                          IsFirstOf("--task-cpu-mode", a.task_cpu_mode, "burn", "sleep"));
  k->task_cpu_sleeps = !burns;
  return OkStatus();
}

// The workload knobs, the preset's (found into `preset`) over them, and the scheduler's.
Status ApplyWorkloadKnobs(const BenchKnobs& a, std::optional<Preset>* preset,
                          WorkloadKnobs* k) {
  VSTACK_ASSIGN_OR_RETURN(k->block_size, ParseBlockSize(a.bs));
  k->write_pct = a.write_pct;
  VSTACK_ASSIGN_OR_RETURN(k->sample_cpu, IsFirstOf("--cpu-sampling", a.cpu_sampling, "on", "off"));
  VSTACK_ASSIGN_OR_RETURN(const size_t pattern, OneOf("--pattern", a.pattern, PatternNames()));
  k->pattern = pattern == 0 ? AccessPattern::kRandom : AccessPattern::kSequential;
  k->queue_depth = a.qd;
  k->threads = a.threads;
  if (!a.duration.empty()) {
    if (a.ios > 0) {  // one window: --ios ran and --duration was dropped without a word
      return Bad(
          "--ios and --duration both set the measured window (a count of I/Os, or a "
          "time): give one");
    }
    VSTACK_ASSIGN_OR_RETURN(k->duration_s, ParseSeconds("--duration", a.duration));
  }
  k->io_count = a.ios;
  VSTACK_ASSIGN_OR_RETURN(k->warmup_s, ParseSeconds("--warmup", a.warmup));
  auto size = ParseSize(a.size);
  if (!size) return Bad("--size: " + size.error().message);
  k->target_size = *size;
  k->seed = a.seed;
  VSTACK_RETURN_IF_ERROR(ParseDistribution(a.distribution, k));
  k->flush_interval = a.flush_interval;
  VSTACK_RETURN_IF_ERROR(OneOf("--content", a.content, ContentNames()));
  VSTACK_RETURN_IF_ERROR(ParseContent(a.content, k));
  k->dedupe_pct = a.dedupe_pct;
  k->compress_pct = a.compress_pct;
  if (!a.preset.empty()) {
    VSTACK_RETURN_IF_ERROR(OneOf("--preset", a.preset, PresetNames()));
    VSTACK_ASSIGN_OR_RETURN(*preset, FindPreset(a.preset));
    ApplyPresetKnobs(&**preset, k, !a.duration.empty());
  }
  VSTACK_RETURN_IF_ERROR(ApplySchedulerKnobs(a, k));
  return ValidateKnobs(*k);
}

// --rounds N, or --rounds auto with --precision and --max-time.
Status ApplyRoundKnobs(const BenchKnobs& a, MatrixOptions* o) {
  const bool default_matrix = a.stacks.empty() && a.preset.empty();
  const std::string rounds = a.rounds.empty() ? (default_matrix ? "auto" : "3") : a.rounds;
  // Checked whatever --rounds says: a bad value is refused, not ignored.
  char* p_end = nullptr;
  const double p = std::strtod(a.precision.c_str(), &p_end);
  if (p_end == a.precision.c_str() || std::string(p_end) != "%" || !(p > 0 && p < 100)) {
    return Bad("--precision: '" + a.precision + "' is not a percentage such as 2%");
  }
  VSTACK_ASSIGN_OR_RETURN(const double max_time_s, ParseSeconds("--max-time", a.max_time));
  if (!(max_time_s > 0)) return Bad("--max-time: '" + a.max_time + "' is not > 0");
  if (rounds == "auto") {
    o->auto_rounds = true;
    o->rounds = 1000;
    o->precision = p / 100;
    o->max_time_s = max_time_s;
    return OkStatus();
  }
  char* end = nullptr;
  const long n = std::strtol(rounds.c_str(), &end, 10);
  if (end == rounds.c_str() || *end != 0 || n < 1 || n > 1000) {
    return Bad("--rounds: '" + rounds + "' is neither auto nor in 1..1000");
  }
  o->rounds = static_cast<int>(n);
  return OkStatus();
}

// A --stack that is a path, as every other command takes it: an existing file becomes the spec
// its format probe gives (file:PATH or vhd+file:PATH), said in `notes`; a path that does not
// exist is an error that shows the spec to create it. Named stacks and specs are returned as they are.
Result<std::string> StackOrPath(const std::string& text, std::vector<std::string>* notes) {
  const auto named = NamedStackNames();
  struct stat st;
  const bool file_here = text.find('/') == std::string::npos && ::stat(text.c_str(), &st) == 0;
  if (std::find(named.begin(), named.end(), text) != named.end() || IsStackSpec(text) ||
      (text.find('/') == std::string::npos && !file_here)) {
    return text;  // (a bare name is a file's only if such a file exists here: "disk.vhd")
  }
  OpenOptions ro;
  ro.read_only = true;
  std::string spec;
  if (auto dev = OpenImage(text, ro, &spec); !dev) {
    // The spec that makes a new image there, only for what reads as a path: "file:" before a
    // misspelt spec ("fiel:/x", "a=file:/x") made nonsense.
    const bool missing_path = dev.error().code == std::errc::no_such_file_or_directory &&
                              text.find(':') == std::string::npos;
    return Bad("--stack " + text + ": " + dev.error().message +
               (missing_path ? "; to make a new image there, give a spec such as file:" + text +
                                   ",create=on,size=1G"
                             : ""));
  }
  if (notes) notes->push_back("--stack " + text + " runs the stack " + spec);
  return spec;
}

// The stacks: the preset's, the default matrix, or each --stack resolved and write-guarded.
Result<std::vector<StackPlan>> ResolveStacks(const BenchKnobs& a,
                                             const std::optional<Preset>& preset,
                                             const BackendChoice& backend, Prepare prepare,
                                             std::vector<std::string>* notes) {
  if (preset && !a.stacks.empty()) return Bad("--preset brings its own stacks: drop --stack");
  if (preset) return preset->stacks;
  if (a.stacks.empty()) return DefaultMatrix(backend);
  std::vector<StackPlan> plans;
  const WriteIntent intent{a.write_pct, prepare, a.allow_write};
  for (const std::string& text : a.stacks) {
    VSTACK_ASSIGN_OR_RETURN(const std::string s, StackOrPath(text, notes));
    VSTACK_ASSIGN_OR_RETURN(StackPlan p, ResolveStack(s, backend));
    // A preset writes only into images made for it (under {dir}, or tools/ceph-up's).
    const bool preset_plan = p.name != p.spec;
    if (p.image.empty() && !preset_plan) VSTACK_RETURN_IF_ERROR(GuardWrites(intent, &p));
    // The same stack twice (an A/A check): the second is "NAME #2", so that every row, ratio and
    // chart names one stack.
    const auto same = std::count_if(plans.begin(), plans.end(), [&](const StackPlan& q) {
      return q.name == p.name || q.name.rfind(p.name + " #", 0) == 0;
    });
    if (same > 0) p.name += " #" + std::to_string(same + 1);
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace

Result<MatrixOptions> PlanBench(const BenchKnobs& a, std::vector<std::string>* notes) {
  MatrixOptions o;
  WorkloadKnobs& k = o.knobs;
  std::optional<Preset> preset;
  VSTACK_RETURN_IF_ERROR(ApplyWorkloadKnobs(a, &preset, &k));
  VSTACK_RETURN_IF_ERROR(ApplyRoundKnobs(a, &o));

  BackendChoice backend;
  VSTACK_RETURN_IF_ERROR(IsFirstOf("--backend", a.backend, "uring", "file"));
  backend.backend = a.backend;
  VSTACK_ASSIGN_OR_RETURN(backend.direct, IsFirstOf("--direct", a.direct, "on", "off"));
  VSTACK_ASSIGN_OR_RETURN(Prepare prepare, ParsePrepare(a.prepare));
  VSTACK_ASSIGN_OR_RETURN(o.stacks, ResolveStacks(a, preset, backend, prepare, notes));
  if (a.cpu_ready.size() > 1) o.stacks = SweepCpuReady(o.stacks, a.cpu_ready, a.ready_stall);
  for (StackPlan& p : o.stacks) {
    if (prepare != Prepare::kAuto) p.prepare = prepare;
    if (!p.image.empty() && k.target_size == 0) {
      return Bad("--size: stack '" + p.name + "' makes its own image and needs a size > 0");
    }
  }
  if (Status sizes = CheckStackSizes(o.stacks, k); !sizes) return sizes.error();
  o.scratch_parent = a.dir;
  if (!a.dir.empty() && access(a.dir.c_str(), W_OK) != 0) {
    return Bad("--dir: '" + a.dir + "' is not a writable directory");
  }
  return o;
}

}  // namespace vstack::bench
