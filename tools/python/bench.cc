// vstack.bench() and vstack.space(): the same library calls as `vstack bench` and `vstack
// space` (bench::Benchmark, AnalyzeSpace, MergeSpaceSketches), with the knobs taken by the CLI's
// names and checked by the library (bench::SetKnob), the GIL released while they run.
#include "bench/report/bench.h"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/space/space.h"
#include "bench/report/records.h"
#include "bench/report/report_dir.h"
#include "bench/workload/knob_text.h"
#include "tools/python/binding.h"

namespace vstack::python {
namespace {

// A finished run: the library's result, turned into Python objects on demand.
struct PyBenchResult {
  bench::BenchResult result;
};

const char* OutcomeName(bench::BenchOutcome o) {
  switch (o) {
    case bench::BenchOutcome::kFailed: return "failed";
    case bench::BenchOutcome::kInterrupted: return "interrupted";
    case bench::BenchOutcome::kOk: break;
  }
  return "ok";
}

// The knobs refused: a stack spec that does not open is a SpecError, the rest a ValueError, with
// the CLI's words.
[[noreturn]] void RaiseKnobError(const Error& e) {
  if (e.message.rfind("--stack", 0) == 0 || e.code != make_error_code(Errc::kInvalidArgument)) {
    Raise(e);
  }
  throw py::value_error(e.message);
}

std::vector<std::string> Values(const std::vector<PathArg>& paths) {
  std::vector<std::string> out;
  for (const PathArg& p : paths) out.push_back(p.value);
  return out;
}

py::dict ProgressDict(const bench::MatrixProgress& p) {
  py::dict d;
  d["round"] = p.round;
  d["rounds"] = p.rounds;
  d["stack"] = p.stack;
  d["activity"] = p.activity;
  d["elapsed_s"] = p.run.elapsed_s;
  d["total_s"] = p.run.total_s;
  d["warming_up"] = p.run.warming_up;
  d["ios"] = p.run.ios;
  d["iops"] = p.run.iops;
  return d;
}

// `knobs` are (flag, text) pairs as vstack/__init__.py makes them from the keyword arguments
// ("--qd", "8"); `command` is the equivalent CLI line the reports show; `progress` is None or
// a callable given one dict per progress event.
PyBenchResult Bench(const std::vector<PathArg>& stacks,
                    const std::vector<std::pair<std::string, std::string>>& knob_texts,
                    const std::string& diskspd, const PathArg& fio_job, const std::string& command,
                    const py::object& progress) {
  bench::BenchKnobs knobs;
  knobs.stacks = Values(stacks);
  std::vector<std::string> typed;
  for (const auto& [flag, text] : knob_texts) {
    if (Status st = bench::SetKnob(&knobs, flag, text); !st) throw py::value_error(st.error().message);
    typed.push_back(flag);
  }
  Result<std::string> ran_as = bench::ApplyForeignArgs(diskspd, fio_job.value, typed, &knobs);
  if (!ran_as) RaiseKnobError(ran_as.error());

  std::atomic<bool> stop{false};
  std::optional<py::error_already_set> callback_error;
  bench::BenchRunHooks hooks;
  hooks.command = command;
  hooks.stop = &stop;
  hooks.on_progress = [&](const bench::MatrixProgress& p) {
    GilAcquire locked;
    if (callback_error) return;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C stops the run
      if (!progress.is_none()) progress(ProgressDict(p));
    } catch (py::error_already_set& e) {
      callback_error = std::move(e);
      stop.store(true);
    }
  };
  std::vector<std::string> notes;
  if (!ran_as->empty()) notes.push_back(*ran_as);
  hooks.on_note = [&notes](const std::string& n) { notes.push_back(n); };
  Result<bench::BenchResult> run = MakeError(Errc::kIo, "not run");
  {
    GilRelease unlocked;
    run = bench::Benchmark(knobs, hooks);
  }
  if (callback_error) throw std::move(*callback_error);
  if (!run) RaiseKnobError(run.error());
  run->messages.insert(run->messages.begin(), notes.begin(), notes.end());
  return PyBenchResult{std::move(*run)};
}

void WriteReport(const PyBenchResult& r, const PathArg& dir) {
  Status st;
  {
    GilRelease unlocked;
    st = bench::WriteReportDir(dir.value, r.result.report);
  }
  if (!st) Raise(st.error());
}

SpaceKnobs SpaceKnobsFrom(const py::dict& o) {
  SpaceKnobs k;
  std::map<std::string, std::string*> texts = {
      {"scope", &k.scope},           {"grain", &k.grain},           {"dedup", &k.dedup},
      {"codec", &k.codec},           {"rule", &k.rule},             {"protection", &k.protection},
      {"checksum", &k.checksum},     {"mode", &k.mode},             {"replay_dir", &k.replay_dir},
      {"fraction", &k.fraction},     {"accuracy", &k.accuracy},     {"confidence", &k.confidence},
      {"sketch", &k.sketch}};
  std::vector<std::string> names = {"threads", "estimate", "seed"};
  for (const auto& [name, field] : texts) names.push_back(name);
  for (const auto& [key, value] : o) {
    const std::string name = py::str(key);
    if (name == "replay_dir" || name == "sketch") {  // paths: a str or os.PathLike
      std::optional<std::string> path = FsPath(value);
      if (!path) {
        throw py::type_error(name + ": expected a str or os.PathLike, not " +
                             Py_TYPE(value.ptr())->tp_name);
      }
      *texts.at(name) = std::move(*path);
    } else if (auto it = texts.find(name); it != texts.end()) {
      *it->second = py::str(value);
    } else if (name == "threads") {
      // Bounded by the library (SpaceOptionsFrom: at most 1024), with the CLI's words.
      k.threads =
          static_cast<unsigned>(std::min<uint64_t>(ByteCount(value, "threads"), UINT32_MAX));
    } else if (name == "seed") {
      k.seed = ByteCount(value, "seed");
    } else if (name == "estimate") {
      k.estimate = Flag(value, "estimate");
    } else {
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      throw py::value_error("unknown option '" + name + "' (vstack.space takes " + list + ")");
    }
  }
  return k;
}

// The report as `vstack space --output=json` prints it; the sketch file written if asked.
py::object SpaceReport(const Result<SpaceResult>& r, const std::string& sketch_path) {
  if (!r) Raise(r.error());
  if (!sketch_path.empty() && !r->sketch.empty()) {
    errno = 0;
    std::ofstream f(sketch_path, std::ios::binary | std::ios::trunc);
    f << r->sketch;
    if (!f.flush()) {
      const std::error_code why(errno != 0 ? errno : EIO, std::system_category());
      Raise(MakeError(Errc::kIo, "cannot write sketch '" + sketch_path + "': " + why.message()));
    }
  }
  return FromJson(r->json);
}

// AnalyzeSpace() on a thread of its own, so that Ctrl-C stops it: Python sees a signal only on
// its main thread, and the analysis asks keep_going from its workers. The calling thread waits
// without the GIL and looks for a signal Python has noted every 50 ms; one found stops the
// analysis (which removes what it created) and is raised once the analysis has returned.
Result<SpaceResult> AnalyzeStoppably(const SpaceKnobs& knobs,
                                     const std::vector<std::string>& images) {
  std::atomic<bool> stop{false};
  SpaceHooks hooks;
  hooks.keep_going = [&stop] { return !stop.load(); };
  std::future<Result<SpaceResult>> run =
      std::async(std::launch::async, [&] { return AnalyzeSpace(knobs, images, hooks); });
  std::optional<py::error_already_set> raised;
  for (bool done = false; !done;) {
    {
      GilRelease unlocked;
      done = run.wait_for(std::chrono::milliseconds(50)) == std::future_status::ready;
    }
    if (!done && !raised && PyErr_CheckSignals() != 0) {
      raised.emplace();
      stop.store(true);
    }
  }
  Result<SpaceResult> r = run.get();
  if (raised) throw std::move(*raised);
  return r;
}

py::object Space(const std::vector<PathArg>& images, const py::dict& options) {
  // The CLI's usage error (tools/cmd_space.cc): with no image the analysis would report zeros.
  if (images.empty()) {
    throw py::value_error("give the images to analyse (or: vstack space merge SKETCH...)");
  }
  const SpaceKnobs knobs = SpaceKnobsFrom(options);
  const Result<SpaceResult> r = AnalyzeStoppably(knobs, Values(images));
  return SpaceReport(r, knobs.sketch);
}

py::object SpaceMerge(const std::vector<PathArg>& sketches, const py::dict& options) {
  SpaceKnobs knobs = SpaceKnobsFrom(options);
  const std::string sketch_path = knobs.sketch;
  knobs.sketch.clear();
  Result<SpaceResult> r = MakeError(Errc::kIo, "not run");
  {
    GilRelease unlocked;
    r = MergeSpaceSketches(knobs, Values(sketches));
  }
  return SpaceReport(r, sketch_path);
}

}  // namespace

void AddBench(py::module_& m) {
  py::class_<PyBenchResult>(m, "BenchResult",
                            "What vstack.bench() measured (the CLI's `vstack bench` report).")
      .def_property_readonly(
          "json", [](const PyBenchResult& r) { return FromJson(r.result.json); },
          "The dict `vstack bench --output=json` prints.")
      .def_property_readonly(
          "text", [](const PyBenchResult& r) { return r.result.text; },
          "The text report `vstack bench` prints.")
      .def_property_readonly(
          "outcome", [](const PyBenchResult& r) { return OutcomeName(r.result.outcome); },
          "'ok', 'failed' (a stack or the run failed: see messages; the CLI exits 1) or "
          "'interrupted'.")
      .def_property_readonly(
          "messages", [](const PyBenchResult& r) { return r.result.messages; },
          "What the CLI prints on stderr: what a --diskspd/--fio-job ran as, the planning's "
          "notes, errors and warnings.")
      .def(
          "records",
          [](const PyBenchResult& r) { return FromJson(bench::BenchRecords(r.result.report)); },
          R"(One flat dict per stack per round, in the report's order: stack, spec, round (from 1),
baseline, measured, interrupted, error, seconds, ios, iops, read_iops, write_iops, mib_s,
mean_us, p50_us, p99_us, p99.9_us, cpu_us_per_io, iops_per_cpu_s, process_cpu_pct,
others_cpu_pct, host_ready_pct, and the ratios to the baseline's round of the same number:
iops_vs_base, cpu_per_io_vs_base, efficiency_vs_base, p99_vs_base (None when not measured).)")
      .def("report", &WriteReport, py::arg("dir"),
           "Writes the report folder `vstack bench --report-dir DIR` writes (index.html, "
           "report.json, SVG charts), creating DIR if needed.");
  m.def("_bench", &Bench, py::arg("stacks"), py::arg("knobs"), py::arg("diskspd"),
        py::arg("fio_job"), py::arg("command"), py::arg("progress"));
  m.def("_space", &Space, py::arg("images"), py::arg("options"));
  m.def("_space_merge", &SpaceMerge, py::arg("sketches"), py::arg("options"));
}

}  // namespace vstack::python
