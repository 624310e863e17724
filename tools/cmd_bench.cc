// vstack bench: run one workload through several stacks side by side, in interleaved rounds,
// and explain every gap layer by layer. With no --stack it runs the default matrix (raw,
// passthrough, fixed VHD, dynamic VHD allocated and fresh, dedup, zstd, dedup+zstd) on
// temporary files; stacks whose components are not in this build are skipped with a note.
//
// Ctrl-C (or SIGTERM) stops the run: what was measured is printed, temporary files are
// removed, and the exit status is 130. A second Ctrl-C kills at once.
#include <fmt/format.h>

#include <atomic>
#include <cstdio>

#include "bench/report/bench.h"
#include "bench/report/report_dir.h"
#include "bench/anchors/child_process.h"
#include "bench/workload/bench_knobs.h"
#include "bench/workload/knob_text.h"
#include "bench/workload/presets.h"
#include "bench/workload/stack_plan.h"
#include "tools/bench/progress_line.h"
#include "tools/command.h"
#include "tools/interrupt.h"
#include "tools/output.h"
#include "tools/usage.h"

namespace vstack::cli {
namespace {

// The knobs (bench/workload/bench_knobs.h), and what only the command line has: the output,
// the report folder, the progress line and the foreign command lines it translates.
struct BenchArgs {
  bench::BenchKnobs knobs;
  std::string report_dir;
  bool no_report = false, quiet = false;
  OutputFormat output = OutputFormat::kText;
  std::string diskspd, fio_job;
  std::string command_line;
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

void RunBench(const BenchArgs& args) {
  const bool report = !args.report_dir.empty() && !args.no_report;
  if (report) {  // before anything is measured: a folder that cannot be written fails now
    if (Status st = bench::PrepareReportDir(args.report_dir); !st) Fail("bench", st.error().message);
  }
  Result<bench::BenchResult> run = [&] {
    InterruptScope interrupt;
    ProgressLine progress(!args.quiet);
    bench::BenchRunHooks hooks;
    hooks.command = args.command_line;
    hooks.stop = &InterruptScope::stop();
    hooks.on_progress = [&](const bench::MatrixProgress& p) { progress.Update(p); };
    hooks.on_note = [](const std::string& n) {
      std::fprintf(stderr, "vstack bench: %s\n", n.c_str());
    };
    return bench::Benchmark(args.knobs, hooks);
  }();
  if (!run) FailUsage("bench", run.error().message);

  fmt::print("{}", args.output == OutputFormat::kJson ? run->json + "\n" : run->text);
  std::fflush(stdout);
  // Errors and warnings also go to stderr, whatever the output format.
  for (const std::string& m : run->messages) {
    std::fprintf(stderr, "vstack bench: %s\n", m.c_str());
  }
  bool report_failed = false;
  if (report) {
    const std::string dir = args.report_dir;
    if (Status st = bench::WriteReportDir(dir, run->report); !st) {
      std::fprintf(stderr, "vstack bench: %s\n", st.error().message.c_str());
      report_failed = true;
    } else {
      std::fprintf(stderr, "vstack bench: report written to %s/index.html\n", dir.c_str());
    }
  }
  switch (run->outcome) {
    case bench::BenchOutcome::kInterrupted: Exit(130);
    case bench::BenchOutcome::kFailed: Exit(1);
    case bench::BenchOutcome::kOk: break;
  }
  if (report_failed) Exit(1);
}

// Sets the knobs a --diskspd or --fio-job translation gives, as if typed on the command line,
// and says on stderr what it ran as (bench::ApplyForeignArgs: options typed on the command line
// win over the translation).
void ApplyForeign(CLI::App& cmd, BenchArgs& a) {
  std::vector<std::string> typed;
  for (const std::string& flag : bench::KnobFlags()) {
    if (cmd.get_option(flag)->count() > 0) typed.push_back(flag);
  }
  Result<std::string> line = bench::ApplyForeignArgs(a.diskspd, a.fio_job, typed, &a.knobs);
  // A job file that cannot be read (missing, a directory) is an error; a bad line or job, usage.
  if (!line && line.error().code != make_error_code(Errc::kInvalidArgument)) {
    Fail("bench", line.error().message);
  }
  if (!line) FailUsage("bench", line.error().message);
  if (!line->empty()) std::fprintf(stderr, "vstack bench: %s\n", line->c_str());
}

}  // namespace

void AddBenchCommand(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  bench::BenchKnobs& k = a->knobs;
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Run one workload through several stacks side by side (interleaved rounds, medians) and "
      "explain every gap layer by layer. Without --stack: the default matrix on temporary files.");
  // A knob whose default --help shows.
  auto knob = [cmd](const std::string& name, auto& value, const std::string& help) {
    return cmd->add_option(name, value, help)->capture_default_str();
  };
  cmd->add_option(
      "--stack", k.stacks,
      "a named stack (" +
          [] {
            std::string s;
            for (const std::string& n : bench::NamedStackNames()) s += (s.empty() ? "" : ", ") + n;
            return s;
          }() +
          "), a stack spec, or an existing image file; repeatable; {dir} in a spec is the scratch "
          "directory");
  knob("--bs", k.bs, "block size per request");
  knob("--write-pct", k.write_pct, "percent of requests that write (0..100)");
  Choices(knob("--pattern", k.pattern, "access pattern"), bench::PatternNames());
  WholeNumber(knob("--qd", k.qd, "outstanding requests per thread"));
  WholeNumber(knob("--threads", k.threads, "threads, each with its own queue"));
  cmd->add_option("--duration", k.duration,
                  "measured time per run (e.g. 2s, 500ms); default 2s, or the --preset's own");
  WholeNumber(knob("--ios", k.ios, "measured I/Os per run instead of a duration (0: timed)"));
  knob("--warmup", k.warmup, "unmeasured warm-up per run");
  knob("--size", k.size, "bytes exercised from offset 0 (and the size of created images)");
  WholeNumber(knob("--seed", k.seed, "RNG seed (round r uses seed + r)"));
  knob("--distribution", k.distribution, "uniform or zipf:THETA (random pattern)");
  WholeNumber(knob("--flush-interval", k.flush_interval, "a flush after every N writes per thread (0: none)"));
  Choices(knob("--content", k.content,
               "write buffers (pattern: bytes 0..255 repeating, diskspd's default)"),
          bench::ContentNames());
  knob("--dedupe-pct", k.dedupe_pct, "percent of writes repeating earlier data");
  knob("--compress-pct", k.compress_pct, "percent of each 4 KiB chunk that compresses away");
  cmd->add_option("--rounds", k.rounds,
                  "interleaved rounds, or auto: add rounds until every ratio's 95% interval is "
                  "within --precision or --max-time is spent (at least 3). Default: auto for the "
                  "default matrix, 3 otherwise");
  knob("--precision", k.precision, "--rounds auto: the interval half-width to reach");
  knob("--max-time", k.max_time, "--rounds auto: the wall-time budget of the run");
  cmd->add_flag("--allow-write", k.allow_write,
                "let the workload (and --prepare fill) write into an image or device you name; "
                "RISK: its data is overwritten. Without it, a named image is only read "
                "(--write-pct 0) or refused");
  knob("--backend", k.backend, "backend of the presets' image files: uring or file");
  knob("--direct", k.direct, "O_DIRECT for the presets' image files: on or off");
  knob("--prepare", k.prepare,
       "auto (each stack's own), fill (write everything first), fresh (new image every round), "
       "none");
  cmd->add_option("--dir", k.dir, "where temporary images go (default: $TMPDIR or /var/tmp)");
  cmd->add_option("--report-dir", a->report_dir,
                  "write the report folder (index.html, report.json, SVG charts) here; none "
                  "without it")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_flag("--no-report", a->no_report, "do not write the report folder (even with --report-dir)");
  cmd->add_flag("--compare-qemu", k.compare_qemu,
                "also run qemu-img bench on the same image files (raw, vpc) every round");
  cmd->add_flag("--qemu-create", k.qemu_create,
                "create the images qemu can open (raw, vpc) with `qemu-img create` instead of "
                "vstack, so vstack and --compare-qemu both start from qemu's own image");
  cmd->add_flag("--compare-fio", k.compare_fio, "also run fio with the same knobs on the raw file (or, for an rbd: stack, the RBD image with fio's rbd engine) every round");
  cmd->add_flag("--quiet", a->quiet, "no live progress line");
  Choices(cmd->add_option("--preset", k.preset, "reproduce a published finding (docs/presets.md)"),
          bench::PresetNames());
  cmd->add_option("--cpu-ready", k.cpu_ready,
                  "RDY%: stall each scheduler this share of wall time (quantum scheduler on); "
                  "several values (1.2,5.1,28.4) sweep")
      ->delimiter(',');
  cmd->add_option("--quantum", k.quantum, "cooperative scheduler quantum of wall time (default 4ms "
                                           "with --cpu-ready)");
  cmd->add_option("--ready-stall", k.ready_stall, "CPU Ready stall length: 4ms, exp:MEAN, "
                                                   "uniform:MIN:MAX, lognormal:MEAN:SD; one per "
                                                   "--cpu-ready value to grow with the load")
      ->delimiter(',')
      ->capture_default_str();
  knob("--schedulers", k.schedulers, "schedulers (vCPUs) the threads share");
  cmd->add_option("--task-cpu", k.task_cpu,
                  "CPU each thread works on its scheduler before each I/O, checking its quantum "
                  "every 100us (real work): 700us, exp:MEAN, ...; needs --cpu-ready or --quantum");
  knob("--task-cpu-mode", k.task_cpu_mode,
       "burn: --task-cpu is real CPU on the thread; sleep: the thread holds its scheduler that "
       "long asleep (more schedulers than this machine has cores)");
  knob("--cpu-sampling", k.cpu_sampling,
       "sample each thread's CPU by layer for the per-layer CPU (on), or not (off: only to "
       "measure what the sampling costs)");
  cmd->add_flag("--exchange", k.exchange,
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
