// SetKnob and ApplyForeignArgs (knob_text.h): knobs by name and text, and the foreign command
// lines' knobs applied under the typed ones.
#include "bench/workload/knob_text.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <utility>

#include "bench/workload/foreign_args.h"
#include "lib/spec.h"
#include "lib/suggest.h"

namespace vstack::bench {
namespace {

Error BadKnobText(const std::string& message) { return MakeError(Errc::kInvalidArgument, message); }

template <typename T>
Status ParseWhole(const std::string& flag, const std::string& text, T* out) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return BadKnobText(flag + ": '" + text + "' is not a whole number from 0 to " +
                       std::to_string(std::numeric_limits<T>::max()));
  }
  *out = v;
  return OkStatus();
}

Status ParseSwitch(const std::string& flag, const std::string& text, bool* out) {
  if (text == "true" || text == "on" || text == "1") {
    *out = true;
  } else if (text == "false" || text == "off" || text == "0") {
    *out = false;
  } else {
    return BadKnobText(flag + ": '" + text + "' is not one of true|false|on|off|1|0");
  }
  return OkStatus();
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string p; std::getline(in, p, ',');) parts.push_back(p);
  return parts;
}

Status ParseReals(const std::string& flag, const std::string& text, std::vector<double>* out) {
  std::vector<double> values;
  for (const std::string& p : SplitCommas(text)) {
    double v = 0;
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (p.empty() || ec != std::errc() || end != p.data() + p.size()) {
      return BadKnobText(flag + ": '" + p + "' is not a number");
    }
    values.push_back(v);
  }
  *out = std::move(values);
  return OkStatus();
}

using Setter = std::function<Status(BenchKnobs*, const std::string& flag, const std::string&)>;

template <typename T>
Setter Whole(T BenchKnobs::*m) {
  return [m](BenchKnobs* k, const std::string& f, const std::string& t) {
    return ParseWhole(f, t, &(k->*m));
  };
}
Setter Text(std::string BenchKnobs::*m) {
  return [m](BenchKnobs* k, const std::string&, const std::string& t) {
    k->*m = t;
    return OkStatus();
  };
}
Setter Switch(bool BenchKnobs::*m) {
  return [m](BenchKnobs* k, const std::string& f, const std::string& t) {
    return ParseSwitch(f, t, &(k->*m));
  };
}

const std::vector<std::pair<std::string, Setter>>& Setters() {
  static const auto* setters = new std::vector<std::pair<std::string, Setter>>{
      {"--bs", Text(&BenchKnobs::bs)},
      {"--write-pct", Whole(&BenchKnobs::write_pct)},
      {"--pattern", Text(&BenchKnobs::pattern)},
      {"--qd", Whole(&BenchKnobs::qd)},
      {"--threads", Whole(&BenchKnobs::threads)},
      {"--duration", Text(&BenchKnobs::duration)},
      {"--ios", Whole(&BenchKnobs::ios)},
      {"--warmup", Text(&BenchKnobs::warmup)},
      {"--size", Text(&BenchKnobs::size)},
      {"--seed", Whole(&BenchKnobs::seed)},
      {"--distribution", Text(&BenchKnobs::distribution)},
      {"--flush-interval", Whole(&BenchKnobs::flush_interval)},
      {"--content", Text(&BenchKnobs::content)},
      {"--dedupe-pct", Whole(&BenchKnobs::dedupe_pct)},
      {"--compress-pct", Whole(&BenchKnobs::compress_pct)},
      {"--rounds", Text(&BenchKnobs::rounds)},
      {"--precision", Text(&BenchKnobs::precision)},
      {"--max-time", Text(&BenchKnobs::max_time)},
      {"--allow-write", Switch(&BenchKnobs::allow_write)},
      {"--backend", Text(&BenchKnobs::backend)},
      {"--direct", Text(&BenchKnobs::direct)},
      {"--prepare", Text(&BenchKnobs::prepare)},
      {"--dir", Text(&BenchKnobs::dir)},
      {"--compare-qemu", Switch(&BenchKnobs::compare_qemu)},
      {"--qemu-create", Switch(&BenchKnobs::qemu_create)},
      {"--compare-fio", Switch(&BenchKnobs::compare_fio)},
      {"--preset", Text(&BenchKnobs::preset)},
      {"--cpu-ready",
       [](BenchKnobs* k, const std::string& f, const std::string& t) {
         return ParseReals(f, t, &k->cpu_ready);
       }},
      {"--quantum", Text(&BenchKnobs::quantum)},
      {"--ready-stall",
       [](BenchKnobs* k, const std::string&, const std::string& t) {
         k->ready_stall = SplitCommas(t);
         return OkStatus();
       }},
      {"--schedulers", Whole(&BenchKnobs::schedulers)},
      {"--task-cpu", Text(&BenchKnobs::task_cpu)},
      {"--task-cpu-mode", Text(&BenchKnobs::task_cpu_mode)},
      {"--cpu-sampling", Text(&BenchKnobs::cpu_sampling)},
      {"--exchange", Switch(&BenchKnobs::exchange)},
  };
  return *setters;
}

// The translation of --diskspd ARGS or --fio-job FILE, and how the line names it.
Result<ForeignArgs> Translate(const std::string& diskspd, const std::string& fio_job) {
  if (!diskspd.empty()) return TranslateDiskspd(diskspd);
  VSTACK_RETURN_IF_ERROR(RefuseNul(fio_job, Errc::kInvalidArgument, "--fio-job path"));
  std::error_code ec;
  if (std::filesystem::is_directory(fio_job, ec)) {
    return MakeError(std::error_code(EISDIR, std::generic_category()),
                     "--fio-job: '" + fio_job + "' is a directory; give a fio job file");
  }
  errno = 0;
  std::ifstream f(fio_job);
  if (!f) {
    const std::error_code why(errno != 0 ? errno : EIO, std::system_category());
    return MakeError(Errc::kIo, "--fio-job: cannot read '" + fio_job + "': " + why.message());
  }
  std::stringstream text;
  text << f.rdbuf();
  return TranslateFioJob(text.str());
}

}  // namespace

const std::vector<std::string>& KnobFlags() {
  static const auto* flags = [] {
    auto* v = new std::vector<std::string>;
    for (const auto& [flag, setter] : Setters()) v->push_back(flag);
    return v;
  }();
  return *flags;
}

Status SetKnob(BenchKnobs* knobs, const std::string& flag, const std::string& text) {
  for (const auto& [name, setter] : Setters()) {
    if (name == flag) return setter(knobs, flag, text);
  }
  return BadKnobText("unknown knob '" + flag + "'" + DidYouMean(flag, KnobFlags()));
}

Result<std::string> ApplyForeignArgs(const std::string& diskspd, const std::string& fio_job,
                                     const std::vector<std::string>& typed, BenchKnobs* knobs) {
  if (diskspd.empty() && fio_job.empty()) return std::string();
  const std::string from =
      diskspd.empty() ? "--fio-job " + fio_job : "--diskspd \"" + diskspd + "\"";
  VSTACK_ASSIGN_OR_RETURN(ForeignArgs t, Translate(diskspd, fio_job));
  BenchKnobs result = *knobs;
  std::vector<std::string> kept;
  for (const ForeignKnob& knob : t.knobs) {
    std::string given;  // the typed flag of knob's group, if any (the knob's own first)
    for (const std::string& g : KnobGroup(knob.flag)) {
      const bool is_typed = std::find(typed.begin(), typed.end(), g) != typed.end();
      if (is_typed && (given.empty() || g == knob.flag)) given = g;
    }
    if (!given.empty()) {
      if (std::find(kept.begin(), kept.end(), given) == kept.end()) kept.push_back(given);
      continue;
    }
    if (Status st = SetKnob(&result, knob.flag, knob.value); !st) {
      return BadKnobText(from + " gives " + knob.flag + " " + knob.value + ": " +
                         st.error().message);
    }
  }
  std::string stacks;
  if (!t.targets.empty() && result.stacks.empty()) {
    // The tool's target is its file as bytes (diskspd and fio do I/O to the file itself), opened
    // as the tool would: -Sh, -Su or direct=1 mean O_DIRECT there too (--direct alone applies
    // only to the presets' files, so a plain path ran buffered while the line said "on").
    for (const std::string& target : t.targets) {
      SpecPart part{"file", target, {}};
      if (result.direct == "on") part.options.push_back({"direct", "on"});
      result.stacks.push_back(FormatSpecPart(part));
      stacks += " --stack " + result.stacks.back();
    }
  } else if (!t.targets.empty()) {
    t.notes.push_back("the " + t.tool + " target is not used: --stack names the stacks");
  }
  std::string line = from + " runs as " + TranslationText(t, stacks);
  for (const std::string& k : kept) line += "; " + k + " as given on the command line";
  for (const std::string& n : t.notes) line += "; " + n;
  *knobs = std::move(result);
  return line;
}

}  // namespace vstack::bench
