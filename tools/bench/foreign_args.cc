#include "tools/bench/foreign_args.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "lib/size.h"

namespace vstack::cli {
namespace {

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

void Set(ForeignArgs& a, const std::string& knob, const std::string& value) {
  a.knobs.emplace_back(knob, value);
}

}  // namespace

Result<ForeignArgs> TranslateDiskspd(const std::string& args) {
  const std::string tool = "diskspd";
  ForeignArgs a;
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
    const std::string name = tok.substr(0, 2);
    switch (flag) {
      case 'b': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, SizeText(tool, tok, value));
        Set(a, "--bs", v);
        break;
      }
      case 'd': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, tok, value));
        Set(a, "--duration", v + "s");
        break;
      }
      case 'W': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, tok, value));
        Set(a, "--warmup", v + "s");
        break;
      }
      case 'o': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, tok, value));
        Set(a, "--qd", v);
        break;
      }
      case 't':
      case 'F': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, tok, value));
        Set(a, "--threads", v);
        break;
      }
      case 'r':
        if (!value.empty())
          return Reject(tool, tok, "a random alignment other than the block size");
        Set(a, "--pattern", "random");
        break;
      case 's':
        if (!value.empty() && value != "i") return Reject(tool, tok, "a sequential stride");
        Set(a, "--pattern", "sequential");
        break;
      case 'w': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, tok, value));
        Set(a, "--write-pct", v);
        break;
      }
      case 'c':
      case 'f': {
        VSTACK_ASSIGN_OR_RETURN(std::string v, SizeText(tool, tok, value));
        Set(a, "--size", v);
        break;
      }
      case 'S':
        if (value.empty() || value == "h" || value == "u") {
          Set(a, "--direct", "on");
        } else if (value == "b") {
          Set(a, "--direct", "off");
        } else {
          return Reject(tool, tok, "only -S, -Sh, -Su (O_DIRECT) and -Sb (page cache)");
        }
        break;
      case 'h':
        if (!value.empty()) return Reject(tool, tok, "");
        Set(a, "--direct", "on");
        break;
      case 'Z':
        if (!value.empty())
          return Reject(tool, tok,
                        "a random-buffer size; vstack's buffers are "
                        "random by default");
        Set(a, "--content", "zeros");
        break;
      case 'z':
        if (value.empty()) return Reject(tool, tok, "a time-based seed; give -zN");
        VSTACK_RETURN_IF_ERROR(Count(tool, tok, value));
        Set(a, "--seed", value);
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
        return Reject(tool, name == tok ? tok : tok, "");
    }
  }
  return a;
}

Result<ForeignArgs> TranslateFioJob(const std::string& text) {
  const std::string tool = "fio";
  ForeignArgs a;
  std::istringstream in(text);
  std::string section, job;
  std::string rw, mix_write;
  bool time_based = false;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    line.erase(0, line.find_first_not_of(" \t"));
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
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
    auto trim = [](std::string& s) {
      s.erase(0, s.find_first_not_of(" \t"));
      while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    };
    trim(key);
    trim(value);
    if (key == "bs" || key == "blocksize") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, SizeText(tool, key, value));
      Set(a, "--bs", v);
    } else if (key == "rw" || key == "readwrite") {
      rw = value.substr(0, value.find(':'));
      if (value.find(':') != std::string::npos)
        return Reject(tool, key + "=" + value, "an offset modifier");
      static const std::vector<std::string> kKnown = {"read", "write",     "randread", "randwrite",
                                                      "rw",   "readwrite", "randrw"};
      if (std::find(kKnown.begin(), kKnown.end(), rw) == kKnown.end()) {
        return Reject(tool, key + "=" + value, "vstack bench reads and writes only");
      }
      Set(a, "--pattern", rw.rfind("rand", 0) == 0 ? "random" : "sequential");
    } else if (key == "rwmixwrite") {
      VSTACK_ASSIGN_OR_RETURN(mix_write, Count(tool, key, value));
    } else if (key == "rwmixread") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      mix_write = std::to_string(100 - std::min(100, std::stoi(v)));
    } else if (key == "iodepth") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      Set(a, "--qd", v);
    } else if (key == "numjobs") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      Set(a, "--threads", v);
    } else if (key == "runtime" || key == "ramp_time") {
      const std::string v = AllDigits(value) ? value + "s" : value;  // fio's default unit: s
      Set(a, key == "runtime" ? "--duration" : "--warmup", v);
    } else if (key == "time_based") {
      time_based = true;
    } else if (key == "size") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, SizeText(tool, key, value));
      Set(a, "--size", v);
    } else if (key == "filename") {
      a.targets.push_back(value);
    } else if (key == "direct") {
      Set(a, "--direct", value == "0" ? "off" : "on");
    } else if (key == "buffered") {
      Set(a, "--direct", value == "0" ? "on" : "off");
    } else if (key == "random_distribution") {
      if (value != "random" && value.rfind("zipf:", 0) != 0) {
        return Reject(tool, key + "=" + value, "only random (uniform) and zipf:THETA");
      }
      Set(a, "--distribution", value == "random" ? "uniform" : value);
    } else if (key == "buffer_compress_percentage") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      Set(a, "--compress-pct", v);
    } else if (key == "dedupe_percentage") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      Set(a, "--dedupe-pct", v);
    } else if (key == "zero_buffers") {
      Set(a, "--content", "zeros");
    } else if (key == "fsync" || key == "fdatasync") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      Set(a, "--flush-interval", v);
    } else if (key == "number_ios") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      Set(a, "--ios", v);
    } else if (key == "randseed") {
      VSTACK_ASSIGN_OR_RETURN(std::string v, Count(tool, key, value));
      Set(a, "--seed", v);
    } else if (key == "ioengine") {
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
  if (!rw.empty()) {
    const bool mixed = rw == "rw" || rw == "readwrite" || rw == "randrw";
    const bool writes = rw == "write" || rw == "randwrite";
    Set(a, "--write-pct", mixed ? (mix_write.empty() ? "50" : mix_write) : writes ? "100" : "0");
  } else if (!mix_write.empty()) {
    Set(a, "--write-pct", mix_write);
  }
  if (!time_based) {
    a.notes.push_back(
        "no time_based: fio would stop after `size` bytes; vstack bench runs for "
        "--duration (or --ios)");
  }
  return a;
}

std::string KnobsText(const ForeignArgs& a) {
  std::vector<std::pair<std::string, std::string>> last;
  for (const auto& [k, v] : a.knobs) {
    auto it = std::find_if(last.begin(), last.end(), [&](const auto& p) { return p.first == k; });
    if (it != last.end()) {
      it->second = v;
    } else {
      last.emplace_back(k, v);
    }
  }
  std::string out;
  for (const auto& [k, v] : last) out += (out.empty() ? "" : " ") + k + " " + v;
  return out;
}

}  // namespace vstack::cli
