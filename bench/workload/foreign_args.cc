#include "bench/workload/foreign_args.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>

#include "lib/size.h"

namespace vstack::bench {
namespace {

// vstack bench's knobs in the order the translation lists them.
const std::vector<std::string>& KnobOrder() {
  static const std::vector<std::string> order = {
      "--bs",   "--write-pct",      "--pattern",    "--qd",          "--threads", "--duration",
      "--ios",  "--warmup",         "--size",       "--direct",      "--content", "--distribution",
      "--seed", "--flush-interval", "--dedupe-pct", "--compress-pct"};
  return order;
}

struct ToolDefault {
  const char* flag;
  const char* value;
};

// diskspd's defaults (`diskspd -?`, and one thread per target when neither -t nor -F is given),
// for every knob a diskspd command line can leave out. docs/bench.md has the table and sources.
constexpr ToolDefault kDiskspdDefaults[] = {
    {"--bs", "64K"},
    {"--write-pct", "0"},
    {"--pattern", "sequential"},
    {"--qd", "2"},
    {"--threads", "1"},
    {"--duration", "10s"},
    {"--warmup", "5s"},
    {"--size", "0"},
    {"--direct", "off"},
    {"--content", "pattern"},
    {"--distribution", "uniform"},
    {"--flush-interval", "0"},
};

// fio's defaults (its HOWTO), for every knob a job can leave out; the measured window, which
// depends on runtime=, time_based and size=, is decided in WindowKnob.
constexpr ToolDefault kFioDefaults[] = {
    {"--bs", "4K"},
    {"--write-pct", "0"},
    {"--pattern", "sequential"},
    {"--qd", "1"},
    {"--threads", "1"},
    {"--warmup", "0s"},
    {"--size", "0"},
    {"--direct", "off"},
    {"--content", "random"},
    {"--distribution", "uniform"},
    {"--flush-interval", "0"},
    {"--dedupe-pct", "0"},
    {"--compress-pct", "0"},
};

// The knobs found so far: one per flag, a later value replacing an earlier one.
class KnobSet {
 public:
  void Set(const std::string& flag, const std::string& value,
           KnobSource source = KnobSource::kGiven) {
    knobs_[flag] = ForeignKnob{flag, value, source};
  }
  // True if a knob of `flag`'s group is set.
  bool HasGroup(const std::string& flag) const {
    for (const std::string& f : KnobGroup(flag)) {
      if (knobs_.count(f)) return true;
    }
    return false;
  }
  const ForeignKnob* Find(const std::string& flag) const {
    auto it = knobs_.find(flag);
    return it == knobs_.end() ? nullptr : &it->second;
  }
  // Sets every default whose group the command left out.
  template <size_t N>
  void Default(const ToolDefault (&defaults)[N]) {
    for (const ToolDefault& d : defaults) {
      if (!HasGroup(d.flag)) Set(d.flag, d.value, KnobSource::kToolDefault);
    }
  }
  std::vector<ForeignKnob> Ordered() const {
    std::vector<ForeignKnob> out;
    for (const std::string& f : KnobOrder()) {
      if (const ForeignKnob* k = Find(f)) out.push_back(*k);
    }
    return out;
  }

 private:
  std::map<std::string, ForeignKnob> knobs_;
};

Error Reject(const std::string& tool, const std::string& option, const std::string& why) {
  return MakeError(Errc::kInvalidArgument, tool + " option '" + option +
                                               "' has no equivalent in vstack bench" +
                                               (why.empty() ? "" : " (" + why + ")"));
}

bool AllDigits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// A count ("8"), checked.
Result<std::string> Count(const std::string& tool, const std::string& option,
                          const std::string& value) {
  if (!AllDigits(value)) {
    return MakeError(Errc::kInvalidArgument,
                     tool + " option '" + option + "': '" + value + "' is not a number");
  }
  return value;
}

// A percentage, 0 to 100, checked and kept as written.
Result<std::string> Percent(const std::string& tool, const std::string& option,
                            const std::string& value) {
  if (!AllDigits(value) || value.size() > 3 || std::stoi(value) > 100) {
    return MakeError(Errc::kInvalidArgument, tool + " option '" + option + "': '" + value +
                                                 "' is not a percentage from 0 to 100");
  }
  return value;
}

// A size ("8K", "4k", "1m"), checked and kept as written (upper-cased).
Result<std::string> SizeText(const std::string& tool, const std::string& option,
                             std::string value) {
  for (char& c : value) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!ParseSize(value)) {
    return MakeError(Errc::kInvalidArgument,
                     tool + " option '" + option + "': '" + value + "' is not a size");
  }
  return value;
}

// A fio size as fio reads it with its default kb_base=1024 (its HOWTO, "int"): k, m, g, t and
// p (any case, an optional trailing b) are powers of 2, and kib, mib, gib, tib and pib are
// powers of 10, the reverse of IEC, kept for old job files. Returns the size as vstack writes
// it ("16K"), or in bytes with a note for a power of 10 (4KiB is 4000 bytes to fio).
Result<std::string> FioSize(const std::string& option, const std::string& value,
                            std::vector<std::string>& notes) {
  size_t digits = 0;
  while (digits < value.size() && std::isdigit(static_cast<unsigned char>(value[digits]))) ++digits;
  std::string suffix = value.substr(digits);
  for (char& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t unit = suffix.empty() ? std::string::npos : std::string("kmgtp").find(suffix[0]);
  const bool base2 = suffix.size() == 1 || (suffix.size() == 2 && suffix[1] == 'b');
  const bool base10 = suffix.size() == 3 && suffix.compare(1, 2, "ib") == 0;
  if (digits == 0 || digits > 15 ||
      (!suffix.empty() && (unit == std::string::npos || !(base2 || base10)))) {
    return MakeError(Errc::kInvalidArgument,
                     "fio option '" + option + "': '" + value + "' is not a size");
  }
  const std::string number = value.substr(0, digits);
  if (suffix.empty()) return number;
  if (base2) return number + static_cast<char>(std::toupper(static_cast<unsigned char>(suffix[0])));
  uint64_t bytes = std::stoull(number);
  for (size_t i = 0; i <= unit; ++i) {
    if (bytes > UINT64_MAX / 1000) {
      return MakeError(Errc::kInvalidArgument,
                       "fio option '" + option + "': '" + value + "' is too large");
    }
    bytes *= 1000;
  }
  notes.push_back(option + "=" + value + ": fio reads " + value.substr(digits) +
                  " as a power of 10 (its default kb_base=1024 keeps that old meaning): " +
                  std::to_string(bytes) + " bytes");
  return std::to_string(bytes);
}

// diskspd -Sh, -Suw and -h also ask for write-through (FILE_FLAG_WRITE_THROUGH: each write
// durable when it completes, a FUA write), which vstack bench's writes are not.
std::string WriteThroughNote(const std::string& tok) {
  return tok +
         ": diskspd also writes through (each write durable, FUA); vstack bench's writes "
         "are O_DIRECT without FUA";
}

// diskspd -S<flags>: O_DIRECT (u, h, or -S alone) or the page cache (b).
Result<std::string> DiskspdCaching(const std::string& tok, const std::string& flags) {
  if (flags.empty()) return std::string("on");  // -S is -Su
  if (flags.find_first_not_of("bhuw") != std::string::npos) {
    return Reject("diskspd", tok, "only -S, -Su, -Sh, -Suw (O_DIRECT) and -Sb (page cache)");
  }
  const bool direct = flags.find_first_of("uh") != std::string::npos;
  if (direct && flags.find('b') == std::string::npos) return std::string("on");
  if (flags == "b") return std::string("off");
  return Reject("diskspd", tok, "write-through over the page cache; use -Sb or -Su");
}

// diskspd -Z, -Zr, -Z<size>: the write buffers.
Status DiskspdBuffers(const std::string& tok, const std::string& value, KnobSet& k,
                      std::vector<std::string>& notes) {
  if (value.empty()) {
    k.Set("--content", "zeros");
  } else if (value == "r") {
    k.Set("--content", "random");
  } else if (value.find(',') != std::string::npos) {
    return Reject("diskspd", tok, "write data read from a file");
  } else {
    VSTACK_RETURN_IF_ERROR(SizeText("diskspd", tok, value));
    k.Set("--content", "random");
    notes.push_back(tok +
                    ": diskspd writes from one random buffer of that size; vstack bench's "
                    "random content makes every 4 KiB chunk unique");
  }
  return OkStatus();
}

// Sequential I/O from several threads: the tools start every thread at the file's start
// (diskspd -s without -T, -si one shared stream; fio jobs on one file each read it from 0),
// where vstack bench gives each thread its own part of the region. Said, not hidden.
void NoteSequentialThreads(const KnobSet& k, const std::string& tool, const std::string& how,
                           std::vector<std::string>& notes) {
  const ForeignKnob* pattern = k.Find("--pattern");
  const ForeignKnob* threads = k.Find("--threads");
  if (pattern == nullptr || pattern->value != "sequential" || threads == nullptr ||
      threads->value == "1") {
    return;
  }
  notes.push_back(how + ": " + tool +
                  "'s threads all start at the target's start; vstack bench's sequential "
                  "threads each run through their own part of the region");
}

}  // namespace

std::vector<std::string> KnobGroup(const std::string& flag) {
  if (flag == "--duration" || flag == "--ios") return {"--duration", "--ios"};
  return {flag};
}

Result<ForeignArgs> TranslateDiskspd(const std::string& args) {
  const std::string tool = "diskspd";
  ForeignArgs a;
  a.tool = tool;
  KnobSet k;
  // Each setting once: diskspd refuses some pairs (-r with -si) and lets a later option
  // override an earlier one for others; vstack takes neither guess.
  std::map<std::string, std::string> given_by;  // knob -> the option that set it
  std::string random_align;                     // -r<align>
  auto set = [&](const std::string& knob, const std::string& value,
                 const std::string& tok) -> Status {
    auto [it, fresh] = given_by.emplace(knob, tok);
    if (!fresh) {
      return MakeError(Errc::kInvalidArgument, tool + " options '" + it->second + "' and '" +
                                                   tok + "' both set " + knob +
                                                   ": give one of them");
    }
    k.Set(knob, value);
    return OkStatus();
  };
  std::istringstream in(args);
  for (std::string tok; in >> tok;) {
    // Options start with '-' or '/' ("/b8K"); a path with a second '/' is a target.
    const bool option = tok[0] == '-' || (tok[0] == '/' && tok.find('/', 1) == std::string::npos);
    if (!option) {
      if (tok[0] == '#' || (tok.size() >= 2 && tok[1] == ':')) {
        return Reject(tool, tok, "a Windows disk or drive; give a file or a stack spec");
      }
      a.targets.push_back(tok);
      continue;
    }
    const char flag = tok.size() > 1 ? tok[1] : 0;
    const std::string value = tok.size() > 2 ? tok.substr(2) : "";
    switch (flag) {
      case 'b': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, SizeText(tool, tok, value));
        VSTACK_RETURN_IF_ERROR(set("--bs", v, tok));
        break;
      }
      case 'd': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, tok, value));
        VSTACK_RETURN_IF_ERROR(set("--duration", v + "s", tok));
        break;
      }
      case 'W': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, tok, value));
        VSTACK_RETURN_IF_ERROR(set("--warmup", v + "s", tok));
        break;
      }
      case 'o': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, tok, value));
        VSTACK_RETURN_IF_ERROR(set("--qd", v, tok));
        break;
      }
      case 't':
      case 'F': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, tok, value));
        VSTACK_RETURN_IF_ERROR(set("--threads", v, tok));
        break;
      }
      case 'r':
        if (!value.empty()) {
          VSTACK_ASSIGN_OR_RETURN(random_align, SizeText(tool, tok, value));
        }
        VSTACK_RETURN_IF_ERROR(set("--pattern", "random", tok));
        break;
      case 's':
        if (!value.empty() && value != "i") return Reject(tool, tok, "a sequential stride");
        VSTACK_RETURN_IF_ERROR(set("--pattern", "sequential", tok));
        break;
      case 'w': {  // -w alone is -w0
        VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, tok, value.empty() ? "0" : value));
        VSTACK_RETURN_IF_ERROR(set("--write-pct", v, tok));
        break;
      }
      case 'c':
      case 'f': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, SizeText(tool, tok, value));
        VSTACK_RETURN_IF_ERROR(set("--size", v, tok));
        break;
      }
      case 'S': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, DiskspdCaching(tok, value));
        VSTACK_RETURN_IF_ERROR(set("--direct", v, tok));
        if (value.find_first_of("hw") != std::string::npos)
          a.notes.push_back(WriteThroughNote(tok));
        break;
      }
      case 'h':
        if (!value.empty()) return Reject(tool, tok, "");
        VSTACK_RETURN_IF_ERROR(set("--direct", "on", tok));
        a.notes.push_back(WriteThroughNote(tok));
        break;
      case 'Z':
        VSTACK_RETURN_IF_ERROR(DiskspdBuffers(tok, value, k, a.notes));
        break;
      case 'z':
        if (value.empty()) return Reject(tool, tok, "a time-based seed; give -zN");
        VSTACK_RETURN_IF_ERROR(Count(tool, tok, value));
        VSTACK_RETURN_IF_ERROR(set("--seed", value, tok));
        break;
      case 'L':
        if (!value.empty()) return Reject(tool, tok, "");
        a.notes.push_back("-L: latency is always measured");
        break;
      case 'n':
        if (!value.empty()) return Reject(tool, tok, "");
        a.notes.push_back("-n: vstack bench does not pin threads to CPUs");
        break;
      default:
        return Reject(tool, tok, "");
    }
  }
  // -r<align> equal to the block size is plain -r (vstack aligns random offsets to the block).
  if (!random_align.empty()) {
    const ForeignKnob* bs = k.Find("--bs");
    const auto align = ParseSize(random_align);
    const auto block = ParseSize(bs != nullptr ? bs->value : "64K");
    if (!align || !block || *align != *block) {
      return Reject(tool, "-r" + random_align, "a random alignment other than the block size");
    }
  }
  k.Default(kDiskspdDefaults);
  NoteSequentialThreads(k, tool, "sequential I/O with -t" + k.Find("--threads")->value, a.notes);
  a.knobs = k.Ordered();
  return a;
}

namespace {

// fio's synchronous engines, psync its default: one I/O in flight per job, whatever iodepth.
bool SyncEngine(const std::string& engine) {
  return engine.empty() || engine == "sync" || engine == "psync" || engine == "vsync" ||
         engine == "pvsync" || engine == "pvsync2";
}

// The measured window of a fio job: runtime= (time_based or not), else the I/Os that do `size`
// bytes per job (fio's default stop), else vstack's --duration.
void WindowKnob(const std::string& runtime, bool time_based, KnobSet& k,
                std::vector<std::string>& notes) {
  const ForeignKnob* size = k.Find("--size");
  if (!runtime.empty()) {
    k.Set("--duration", AllDigits(runtime) ? runtime + "s" : runtime);  // fio's unit: seconds
    if (!time_based && size != nullptr && size->source == KnobSource::kGiven) {
      notes.push_back(
          "runtime without time_based: fio also stops once each job has done size "
          "bytes; vstack bench runs for --duration");
    }
    return;
  }
  auto bytes_of = [](const std::string& text) -> uint64_t {
    Result<uint64_t> v = ParseSize(text);  // checked when it was translated
    return v ? *v : 0;
  };
  const uint64_t bs = bytes_of(k.Find("--bs")->value);
  const uint64_t bytes = size != nullptr ? bytes_of(size->value) : 0;
  const uint64_t jobs = std::strtoull(k.Find("--threads")->value.c_str(), nullptr, 10);
  if (!time_based && bs != 0 && bytes >= bs) {
    k.Set("--ios", std::to_string(bytes / bs * jobs), KnobSource::kToolDefault);
    notes.push_back(
        "no runtime: each fio job stops after size bytes, so --ios is jobs x size / "
        "bs");
    return;
  }
  k.Set("--duration", "2s", KnobSource::kVstack);
  notes.push_back(time_based ? "time_based without runtime: fio runs until stopped"
                             : "no runtime and no size: fio would do the whole file once per "
                               "job; give runtime= (with time_based) or size=");
}

}  // namespace

Result<ForeignArgs> TranslateFioJob(const std::string& text) {
  const std::string tool = "fio";
  ForeignArgs a;
  a.tool = tool;
  KnobSet k;
  std::istringstream in(text);
  std::string section, job;
  std::string rw, mix_write, runtime, engine;
  bool time_based = false;
  int line_no = 0;
  auto trim = [](std::string& s) {
    s.erase(0, s.find_first_not_of(" \t"));
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  };
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    // A comment may also end a line, after a space ("rw=randread  # mixed later").
    for (const char* mark : {" #", "\t#", " ;", "\t;"}) {
      if (const size_t at = line.find(mark); at != std::string::npos) line.erase(at);
    }
    trim(line);
    if (line.empty() || line[0] == ';' || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      if (section != "global") {
        if (!job.empty()) {
          return MakeError(Errc::kInvalidArgument,
                           "fio job file: jobs [" + job + "] and [" + section +
                               "]; vstack bench runs one workload, so give one job");
        }
        job = section;
      }
      continue;
    }
    const size_t eq = line.find('=');
    std::string key = line.substr(0, eq),
                value = eq == std::string::npos ? "" : line.substr(eq + 1);
    trim(key);
    trim(value);
    if (key == "bs" || key == "blocksize") {
      if (value.find(',') != std::string::npos) {
        return Reject(tool, key + "=" + value, "a block size per direction; give one");
      }
      VSTACK_ASSIGN_OR_RETURN(std::string v, FioSize(key, value, a.notes));
      k.Set("--bs", v);
    } else if (key == "rw" || key == "readwrite") {
      rw = value.substr(0, value.find(':'));
      if (value.find(':') != std::string::npos)
        return Reject(tool, key + "=" + value, "an offset modifier");
      static const std::vector<std::string> kKnown = {"read", "write",     "randread", "randwrite",
                                                      "rw",   "readwrite", "randrw"};
      if (std::find(kKnown.begin(), kKnown.end(), rw) == kKnown.end()) {
        return Reject(tool, key + "=" + value, "vstack bench reads and writes only");
      }
      k.Set("--pattern", rw.rfind("rand", 0) == 0 ? "random" : "sequential");
    } else if (key == "rwmixwrite") {
      VSTACK_ASSIGN_OR_RETURN(mix_write, Percent(tool, key, value));
    } else if (key == "rwmixread") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Percent(tool, key, value));
      mix_write = std::to_string(100 - std::stoi(v));
    } else if (key == "iodepth") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      k.Set("--qd", v);
    } else if (key == "numjobs") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      k.Set("--threads", v);
    } else if (key == "runtime") {
      // runtime=0 is fio's "no limit": as if not given (the job then does size=).
      const bool unlimited = std::strtod(value.c_str(), nullptr) == 0 &&
                             value.find_first_not_of("0.smh") == std::string::npos;
      runtime = unlimited ? "" : value;
    } else if (key == "ramp_time") {
      k.Set("--warmup", AllDigits(value) ? value + "s" : value);  // fio's default unit: s
    } else if (key == "time_based") {
      time_based = value.empty() || value == "1";
    } else if (key == "size") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, FioSize(key, value, a.notes));
      k.Set("--size", v);
    } else if (key == "filename") {
      a.targets.push_back(value);
    } else if (key == "direct") {
      k.Set("--direct", value == "0" ? "off" : "on");
    } else if (key == "buffered") {
      k.Set("--direct", value == "0" ? "on" : "off");
    } else if (key == "random_distribution") {
      if (value != "random" && value.rfind("zipf:", 0) != 0) {
        return Reject(tool, key + "=" + value, "only random (uniform) and zipf:THETA");
      }
      k.Set("--distribution", value == "random" ? "uniform" : value);
    } else if (key == "buffer_compress_percentage") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      k.Set("--compress-pct", v);
    } else if (key == "dedupe_percentage") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      k.Set("--dedupe-pct", v);
    } else if (key == "zero_buffers") {
      k.Set("--content", "zeros");
    } else if (key == "fsync" || key == "fdatasync") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      k.Set("--flush-interval", v);
    } else if (key == "number_ios") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      k.Set("--ios", v);
    } else if (key == "randseed") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      k.Set("--seed", v);
    } else if (key == "ioengine") {
      engine = value;
      a.notes.push_back("ioengine=" + value +
                        ": vstack bench drives the stack through its own "
                        "queues (--backend chooses uring or file for the presets)");
    } else if (key == "name" || key == "description" || key == "group_reporting" ||
               key == "thread" || key == "norandommap" || key == "randrepeat" ||
               key == "refill_buffers") {
      a.notes.push_back(key + ": changes nothing vstack bench measures");
    } else {
      return Reject(tool, key, "line " + std::to_string(line_no));
    }
  }
  if (job.empty()) {  // fio itself stops here: "No job(s) defined"
    return MakeError(Errc::kInvalidArgument,
                     "fio job file: no job defined (fio would say \"No job(s) defined\"); give "
                     "one job section, such as [job], after [global]");
  }
  const bool mixed = rw == "rw" || rw == "readwrite" || rw == "randrw";
  if (mixed) {  // fio's default mix: rwmixread=50
    k.Set("--write-pct", mix_write.empty() ? "50" : mix_write,
          mix_write.empty() ? KnobSource::kToolDefault : KnobSource::kGiven);
  } else if (!rw.empty()) {
    k.Set("--write-pct", rw == "write" || rw == "randwrite" ? "100" : "0");
  }
  if (const ForeignKnob* qd = k.Find("--qd"); qd && qd->value != "1" && SyncEngine(engine)) {
    a.notes.push_back("iodepth=" + qd->value + " with the synchronous ioengine " +
                      (engine.empty() ? "psync (fio's default)" : engine) +
                      ": one I/O in flight per job, so --qd 1");
    k.Set("--qd", "1");
  }
  k.Default(kFioDefaults);
  const std::string sequential = "rw=" + (rw.empty() ? std::string("read") : rw);
  NoteSequentialThreads(k, tool, sequential + " with numjobs=" + k.Find("--threads")->value,
                        a.notes);
  if (!k.HasGroup("--ios")) WindowKnob(runtime, time_based, k, a.notes);
  a.knobs = k.Ordered();
  return a;
}

std::string KnobsText(const ForeignArgs& a, KnobSource source) {
  std::string out;
  for (const ForeignKnob& k : a.knobs) {
    if (k.source != source) continue;
    out += (out.empty() ? "" : " ") + k.flag + " " + k.value;
    if (k.flag == "--size" && k.value == "0") out += " (the whole target)";
  }
  return out;
}

std::string TranslationText(const ForeignArgs& a, const std::string& stacks) {
  std::string out = KnobsText(a, KnobSource::kGiven) + stacks;
  if (!out.empty() && out[0] == ' ') out.erase(0, 1);
  if (const std::string d = KnobsText(a, KnobSource::kToolDefault); !d.empty()) {
    out += (out.empty() ? "" : "; ") + a.tool + "'s defaults for what it leaves out: " + d;
  }
  if (const std::string v = KnobsText(a, KnobSource::kVstack); !v.empty()) {
    out += "; vstack bench's own (" + a.tool + " sets no such limit): " + v;
  }
  return out;
}

}  // namespace vstack::bench
