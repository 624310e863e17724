#include "analysis/sim/campaign.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "lib/registry.h"

namespace vstack::sim {
namespace {

// A run's result through a pipe: "K V" lines, failures as "failure KIND BYTES" followed by
// exactly BYTES of message.
std::string Serialize(const RunResult& r) {
  std::string out = "ops " + std::to_string(r.ops) + "\ncuts " + std::to_string(r.power_cuts) +
                    "\ntrace " + std::to_string(r.trace_hash) + "\n";
  for (const SimFailure& f : r.failures) {
    out += "failure " + f.kind + " " + std::to_string(f.message.size()) + "\n" + f.message;
  }
  return out;
}

bool Parse(const std::string& text, RunResult* r) {
  size_t at = 0;
  bool complete = false;
  while (at < text.size()) {
    const size_t eol = text.find('\n', at);
    if (eol == std::string::npos) return false;
    const std::string line = text.substr(at, eol - at);
    at = eol + 1;
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp);
    const std::string rest = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key == "ops") r->ops = std::stoull(rest);
    if (key == "cuts") r->power_cuts = std::stoull(rest);
    if (key == "trace") {
      r->trace_hash = std::stoull(rest);
      complete = true;
    }
    if (key == "failure") {
      const size_t sp2 = rest.find(' ');
      const size_t n = std::stoull(rest.substr(sp2 + 1));
      r->failures.push_back({rest.substr(0, sp2), text.substr(at, n)});
      at += n;
    }
  }
  return complete;
}

// Why a run's child process ended without its result: a `timeout` (its time limit of `seconds`
// ran out) or a `crash`.
SimFailure Died(int status, unsigned seconds) {
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
    return {"timeout", "the run exceeded its time limit of " + std::to_string(seconds) +
                           " s of wall clock: a thread that spins without reaching the "
                           "progress seam or a simulated disk, or more --ops than the limit "
                           "allows"};
  }
  std::string how = WIFSIGNALED(status)
                        ? std::string("killed by signal ") + std::to_string(WTERMSIG(status)) +
                              " (" + strsignal(WTERMSIG(status)) + ")"
                        : "exited with status " + std::to_string(WEXITSTATUS(status));
  return {"crash", "the run's process " + how + " before it finished"};
}

// Runs `fn` in a child process, killed after `seconds` of wall clock, and returns its result,
// or a failure if the child died. The child keeps the caller's signal handling (`vstack sim`'s
// InterruptScope: a Ctrl-C, which the whole process group gets, only sets a flag there, so the
// run finishes).
RunResult Isolated(uint64_t seed, unsigned seconds, const std::function<RunResult()>& fn) {
  int fds[2];
  if (pipe(fds) != 0) return fn();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return fn();
  }
  if (pid == 0) {
    close(fds[0]);
    // The run dies with the campaign: killed by its PID (a timeout in a script), the campaign
    // left the run going, orphaned, until the alarm below.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // it died before the line above

    // A safety net outside the simulation: a thread that spins without ever reaching the
    // progress seam or a simulated disk would hang the child for good.
    alarm(seconds);
    const std::string out = Serialize(fn());
    for (size_t done = 0; done < out.size();) {
      const ssize_t n = write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  RunResult r;
  r.seed = seed;
  if (Parse(text, &r)) return r;
  r.failures.push_back(Died(status, seconds));
  return r;
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

Status CheckStacks(const std::vector<std::string>& stacks) {
  if (stacks.empty()) return MakeError(Errc::kInvalidArgument, "name a stack with --stack LAYERS");
  for (const std::string& text : stacks) {
    VSTACK_ASSIGN_OR_RETURN(SimStack stack, SimStack::Parse(text));
    // One short run without faults: a stack that cannot even be formatted and opened (an
    // option's value, a size), or whose content before any write the simulator cannot tell,
    // is a mistake on the command line.
    SimOptions quiet;
    quiet.ops = 0;
    quiet.fault_runs = quiet.crash_runs = quiet.enospc_runs = 0;
    RunResult r = RunSeed(stack, quiet, 1);
    for (const SimFailure& f : r.failures) {
      if (f.kind == "open" || f.kind == "model") {
        return MakeError(Errc::kInvalidArgument, "--stack " + text + ": " + f.message);
      }
    }
  }
  return OkStatus();
}

std::string ReplayCommand(const std::string& stack, const SimOptions& o, uint64_t seed,
                          const std::vector<HistoricalBug>& reintroduce) {
  const SimOptions d;
  std::string cmd = "vstack sim --stack " + Quote(stack) + " --seed " + std::to_string(seed);
  if (o.ops != d.ops) cmd += " --ops " + std::to_string(o.ops);
  if (o.queues != d.queues) cmd += " --queues " + std::to_string(o.queues);
  if (o.depth != d.depth) cmd += " --depth " + std::to_string(o.depth);
  const std::pair<const char*, std::pair<double, double>> rates[] = {
      {"--fault-runs", {o.fault_runs, d.fault_runs}}, {"--eio-rate", {o.eio_rate, d.eio_rate}},
      {"--crash-runs", {o.crash_runs, d.crash_runs}}, {"--land-rate", {o.land_rate, d.land_rate}},
      {"--torn-rate", {o.torn_rate, d.torn_rate}},    {"--enospc-runs", {o.enospc_runs, d.enospc_runs}}};
  for (const auto& [flag, v] : rates) {
    if (v.first != v.second) cmd += std::string(" ") + flag + " " + Number(v.first);
  }
  for (HistoricalBug b : reintroduce) {
    for (const HistoricalBugName& n : kHistoricalBugNames) {
      if (n.bug == b) cmd += std::string(" --reintroduce ") + n.name;
    }
  }
  return cmd;
}

CampaignResult RunCampaign(const CampaignOptions& o,
                           const std::function<void(const std::string&, const RunResult&)>& on_run) {
  CampaignResult result;
  result.trace_hash = 0xCBF29CE484222325ull;
  for (HistoricalBug b : o.reintroduce) HistoricalBugSwitch(b).store(true);
  const uint64_t total = o.fixed.size() + o.seeds;
  for (uint64_t i = 0; i < total; ++i) {
    if (o.stop != nullptr && o.stop->load()) {
      result.interrupted = true;
      break;
    }
    SeedOf s;
    if (i < o.fixed.size()) {
      s = o.fixed[i];
    } else {
      s.seed = o.seed_from + (i - o.fixed.size());
      s.stack = o.stacks[s.seed % o.stacks.size()];
    }
    Result<SimStack> stack = SimStack::Parse(s.stack);
    RunResult r;
    r.seed = s.seed;
    if (!stack) {
      r.failures.push_back({"open", stack.error().ToString()});
    } else {
      auto run = [&] { return RunSeed(*stack, o.sim, s.seed); };
      r = o.isolate ? Isolated(s.seed, o.run_seconds, run) : run();
    }
    ++result.runs;
    result.ops += r.ops;
    result.power_cuts += r.power_cuts;
    for (uint64_t w : {s.seed, r.trace_hash}) {
      for (int b = 0; b < 8; ++b) {
        result.trace_hash = (result.trace_hash ^ ((w >> (8 * b)) & 0xFF)) * 0x100000001B3ull;
      }
    }
    for (const SimFailure& f : r.failures) {
      result.failures.push_back(
          {s.stack, s.seed, f.kind, f.message, ReplayCommand(s.stack, o.sim, s.seed, o.reintroduce)});
    }
    if (on_run) on_run(s.stack, r);
    if (o.stop_after > 0 && result.failures.size() >= o.stop_after) break;
  }
  for (HistoricalBug b : o.reintroduce) HistoricalBugSwitch(b).store(false);
  return result;
}

const std::vector<SimPreset>& SimPresets() {
  static const std::vector<SimPreset> presets = [] {
    SimPreset families{"families",
                       "the formats, passthrough and the emulation layers, alone and nested up to "
                       "3 deep (the CI campaign's)",
                       {
                           // One layer of each family.
                           "vhd:subformat=fixed", "vhd:subformat=dynamic", "vhd:subformat=diff",
                           "vhdx", "vhdx:subformat=fixed", "passthrough",
                           "delay:latency=uniform:1us:2ms", "hv:preset=hyperv-passthrough",
                           "ready:pct=20", "error:ops=write/zero/trim,rate=0.02",
                           // Two deep.
                           "passthrough+vhd:subformat=dynamic", "delay:latency=uniform:1us:500us+vhdx",
                           "vhd:subformat=diff+hv:latency=50us", "ready:pct=10+vhd:subformat=fixed",
                           "error:ops=write/zero/trim,rate=0.02+vhd:subformat=dynamic",
                           "vhdx+delay:latency=20us,qd=2", "vhd:subformat=dynamic+vhdx",
                           // Three deep.
                           "hv:latency=20us+vhd:subformat=dynamic+delay:latency=uniform:1us:300us",
                           "passthrough+vhdx+ready:pct=10",
                           "vhd:subformat=diff+passthrough+delay:latency=uniform:1us:100us",
                       }};
    SimPreset grain{"grain",
                    "dedup, zstd and crc32c, alone and over or under the formats, up to 3 deep",
                    {
                        "dedup", "zstd", "crc32c",
                        "dedup+vhd:subformat=dynamic", "zstd+vhd:subformat=dynamic",
                        "crc32c+vhd:subformat=dynamic", "dedup+vhd:subformat=diff", "zstd+vhdx",
                        "dedup+zstd", "crc32c+dedup", "vhd:subformat=dynamic+dedup", "vhdx+zstd",
                        "vhd:subformat=fixed+crc32c",
                        "dedup+zstd+vhd:subformat=dynamic", "zstd+dedup+vhdx",
                        "crc32c+zstd+vhd:subformat=diff", "vhd:subformat=dynamic+dedup+zstd",
                        "dedup+crc32c+vhd:subformat=fixed", "vhdx+crc32c+dedup",
                    }};
    SimPreset all{"all", "families and grain together", families.stacks};
    all.stacks.insert(all.stacks.end(), grain.stacks.begin(), grain.stacks.end());
    return std::vector<SimPreset>{families, grain, all};
  }();
  return presets;
}

const SimPreset* FindSimPreset(const std::string& name) {
  for (const SimPreset& p : SimPresets()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const std::vector<SeedOf>& RegressionSeeds() {
  // Each fails without its fix (docs/testing.md, "Bugs found").
  static const std::vector<SeedOf> seeds = {
      {"vhd:subformat=dynamic", 397},  // growth that fails keeps no footer at the end
      {"vhd:subformat=diff", 1},      // a queue busy on file and parent polls without waiting
      // A failed write holding one grain twice freed its unit twice (assertions on; else the
      // next commit's Check of the live device reports it).
      {"dedup+vhd:subformat=dynamic", 17},
      {"crc32c", 14},  // a write that failed below kept its grain's old checksum
      // A dynamic VHD's failed bitmap write kept its bits in memory: new data until the close,
      // old after it, under checksums crc32c had recomputed from the new.
      {"crc32c+vhd:subformat=dynamic", 38},
      {"crc32c+vhd:subformat=dynamic", 149},
      // A packed fragment's bin was freed by a commit while the rest of its write was below:
      // freed twice (assertions on) and reused under the fragment (a fragment that does not
      // decompress; a dedup Check that cannot read its metadata through zstd).
      {"zstd", 229},
      {"zstd", 20},
      {"dedup+zstd", 369},
      {"vhdx", 13939543633023801323ull},  // replay grew the file without a write to keep it
      {"vhd:subformat=dynamic+vhdx", 7641042141335029462ull},  // ... and no space for that write
      // A VHDX queue waited for VHDX's metadata lock with requests in flight below that the
      // lock's holder, writing through crc32c and dedup, needed (first write, flush).
      {"vhdx+crc32c+dedup", 9},
      {"vhdx+crc32c+dedup", 1139},
      // crc32c's poll finished a retried write (parked on a grain lock) and then waited through
      // the progress seam with that completion undelivered: the simulator saw no activity.
      {"vhdx+crc32c+dedup", 394},
      {"vhdx+crc32c+dedup", 1074},
      {"vhdx+crc32c+dedup", 1296},
      // The same in zstd's poll (found by `--preset all --seed-from 20000 --seeds 3000`).
      {"dedup+zstd", 21556},
      {"zstd+vhd:subformat=dynamic", 22956},
      // A VHDX replay over a full thin layer could not write its BAT page in place (there even
      // an overwrite needs new space): the reopen failed. It keeps the log and reads through it.
      {"vhdx+crc32c+dedup", 108},
      {"vhdx+zstd", 2175},
      // dedup's checkpoint took a table page that its own failed (EIO) write had torn for
      // corruption: every later flush and the close failed.
      {"vhdx+crc32c+dedup", 864},
      {"vhdx+crc32c+dedup", 901},
      {"vhdx+crc32c+dedup", 1061},
      {"vhdx+crc32c+dedup", 1391},
      // A dynamic VHD's commit failed (ENOSPC) after its BAT sector landed: the failed write
      // came back after the reopen over a later write-zeroes.
      {"error:ops=write/zero/trim,rate=0.02+vhd:subformat=dynamic", 1029692},
      // The same failed commit's BAT sector under crc32c: the reopened VHD read the failed
      // write's data where crc32c had the checksum of zeros (found by the long campaign).
      {"crc32c+vhd:subformat=dynamic", 1202},
      {"crc32c+vhd:subformat=dynamic", 1069912},
      // A failed bitmap write cleared the bits of a write handed back to wait for the next one:
      // it succeeded without them (the long campaign's last three findings).
      {"vhd:subformat=dynamic+dedup", 1072140},
      {"vhd:subformat=diff+passthrough+delay:latency=uniform:1us:100us", 1089757},
      {"hv:latency=20us+vhd:subformat=dynamic+delay:latency=uniform:1us:300us", 1092719},
  };
  return seeds;
}

}  // namespace vstack::sim
