#include "bench/workload/matrix.h"

#include <chrono>
#include <map>

#include "bench/workload/image_setup.h"
#include "bench/workload/stack_stats.h"
#include "bench/workload/summary.h"
#include "lib/registry.h"
#include "lib/size.h"

namespace vstack::bench {
namespace {

class MatrixRun {
 public:
  MatrixRun(const MatrixOptions& o, MatrixResult& m, std::string dir)
      : o_(o), m_(m), dir_(std::move(dir)) {}

  void RunRound(int round) {
    WorkloadKnobs knobs = o_.knobs;
    knobs.seed = o_.knobs.seed + static_cast<uint64_t>(round);
    for (StackOutcome& s : m_.stacks) {
      if (Stopped()) return;
      if (!s.skipped.empty() || !s.error.empty()) continue;
      RunStack(s, round, knobs);
    }
  }

  bool Stopped() const { return o_.stop && o_.stop->load(std::memory_order_relaxed); }

 private:
  struct ImageState {
    bool created = false;
    bool filled = false;
  };

  void Report(const StackOutcome& s, int round, const std::string& activity, Progress p = {}) {
    if (!o_.on_progress) return;
    o_.on_progress(MatrixProgress{round, o_.auto_rounds ? 0 : o_.rounds, s.plan.name, activity, p});
  }

  std::string ImagePath(const StackPlan& p) const { return dir_ + "/" + p.image; }
  std::string TemplatePath(const StackPlan& p) const { return dir_ + "/template-" + p.image; }

  Status Create(const StackPlan& p, const std::string& path, uint64_t size) {
    if (o_.create_image) return o_.create_image(p, path, size);
    return CreateImage(p.image_format, path, size, p.image_options);
  }

  // Creates the plan's image (once), or a fresh copy of its template (every round).
  Status MakeImage(const StackPlan& p, const WorkloadKnobs& k) {
    if (p.image.empty()) return OkStatus();
    const uint64_t size = static_cast<uint64_t>(double(k.target_size) * p.image_scale) /
                          (1 << 20) * (1 << 20);
    ImageState& st = images_[p.image];
    if (p.diff_levels > 0) return MakeChain(p, k, size);
    if (p.prepare == Prepare::kFresh) {
      ImageState& t = images_[TemplatePath(p)];
      if (!t.created) {
        VSTACK_RETURN_IF_ERROR(Create(p, TemplatePath(p), size));
        t.created = true;
      }
      VSTACK_RETURN_IF_ERROR(RemoveFile(ImagePath(p)));
      st = ImageState{};
      return CopySparse(TemplatePath(p), ImagePath(p));
    }
    if (!st.created) {
      VSTACK_RETURN_IF_ERROR(Create(p, ImagePath(p), size));
      st.created = true;
    }
    return OkStatus();
  }

  // A differencing chain: the base (a dynamic VHD, created and filled once), then
  // p.diff_levels empty differencing levels made anew, the last being p.image.
  Status MakeChain(const StackPlan& p, const WorkloadKnobs& k, uint64_t size) {
    const std::string base = "base-" + p.image;
    ImageState& b = images_[base];
    if (!b.created) {
      VSTACK_RETURN_IF_ERROR(CreateImage("vhd", dir_ + "/" + base, size, "subformat=dynamic"));
      b.created = true;
      VSTACK_ASSIGN_OR_RETURN(DevicePtr dev, Open("vhd+" + BaseSpec(p, base)));
      VSTACK_RETURN_IF_ERROR(FillDevice(*dev, k, o_.stop));
      VSTACK_RETURN_IF_ERROR(dev->Close());
      b.filled = true;
    }
    std::string parent = base;
    for (int i = 1; i <= p.diff_levels; ++i) {
      const std::string name =
          i == p.diff_levels ? p.image : "level" + std::to_string(i) + "-" + p.image;
      VSTACK_RETURN_IF_ERROR(RemoveFile(dir_ + "/" + name));
      VSTACK_RETURN_IF_ERROR(CreateImage("vhd", dir_ + "/" + name, 0, "backing_file=" + parent));
      parent = name;
    }
    return OkStatus();
  }

  // The backend part of p.spec, pointed at `file` in the run's directory.
  std::string BaseSpec(const StackPlan& p, const std::string& file) const {
    std::string spec = p.spec.substr(p.spec.find('+') + 1);  // drop "vhd+"
    const size_t at = spec.find(p.image);
    spec.replace(at, p.image.size(), file);
    return ExpandSpec(spec, dir_, 0);
  }

  // In odd rounds the anchors run before vstack, from the second round on (they need a vstack
  // run to size themselves, the previous round's then): a drift within a round, such as a Ceph
  // cluster that slows as it fills, then favours each side in half of the rounds.
  static bool AnchorsFirst(const StackOutcome& s, int round) {
    return round % 2 == 1 && !s.rounds.empty();
  }

  // `round_knobs`: the round's, before the plan's own (PlanKnobs gives both sides the same).
  void RunStack(StackOutcome& s, int round, const WorkloadKnobs& round_knobs) {
    const StackPlan& p = s.plan;
    const bool anchors_first = AnchorsFirst(s, round);
    if (anchors_first) {
      // Prepared as in the earlier rounds (kAuto was resolved by the first).
      RunAnchors(s, round, PlanKnobs(p, s.prepared, round_knobs), s.prepared);
      if (Stopped()) return;
    }
    Report(s, round, "preparing");
    if (Status st = MakeImage(p, round_knobs); !st) {
      s.error = "creating the image: " + st.error().ToString();
      return;
    }
    OpenOptions open;
    open.read_only = p.read_only;
    auto dev = Open(s.spec, open);
    if (!dev) {
      s.error = dev.error().ToString();
      return;
    }
    const std::vector<BlockDevice*> layers = StackLayers(**dev);
    if (s.chain.empty()) {
      for (BlockDevice* d : layers) s.chain.push_back(d->kind() + ": " + d->Describe());
    }
    const bool starts_empty = !layers.back()->Has(kCapPersistent);
    Prepare prepare = p.prepare;
    if (prepare == Prepare::kAuto) prepare = starts_empty ? Prepare::kFill : Prepare::kNone;
    s.prepared = prepare;
    const WorkloadKnobs knobs = PlanKnobs(p, prepare, round_knobs);
    const std::string key = p.image.empty() ? s.spec : p.image;
    if (prepare == Prepare::kFill && (starts_empty || !images_[key].filled)) {
      Report(s, round, "filling");
      if (Status st = FillDevice(**dev, knobs, o_.stop); !st) {
        s.error = st.error().ToString();
        s.interrupted = st.error().code == make_error_code(Errc::kCancelled);
        if (const std::string layer = FailingLayer(**dev); !layer.empty()) {
          s.error += "; it failed in " + layer;
        }
        return;
      }
      images_[key].filled = true;
    }

    RunControl control;
    control.stop = o_.stop;
    control.on_progress = [&](const Progress& pr) { Report(s, round, "running", pr); };
    Report(s, round, "running");
    auto run = RunWorkload(**dev, knobs, control);
    Status closed = (*dev)->Close();
    dev->reset();
    if (!run) {
      s.error = run.error().ToString();
      return;
    }
    RunResult& r = *run;
    r.stack = p.name;
    r.spec = s.spec;
    r.round = round;
    if (!closed && r.error.empty()) r.error = "close: " + closed.error().ToString();
    if (!r.error.empty()) s.error = r.error;
    s.rounds.push_back(std::move(r));
    if (!s.error.empty() || s.rounds.back().interrupted || anchors_first) return;
    RunAnchors(s, round, knobs, prepare);
  }

  // `knobs`: the plan's for this round (PlanKnobs), as the vstack side runs them.
  void RunAnchors(StackOutcome& s, int round, const WorkloadKnobs& knobs, Prepare prepare) {
    const StackPlan& p = s.plan;
    for (Anchor* a : o_.anchors) {
      if (Stopped() || !a->AppliesTo(p)) continue;
      Report(s, round, a->name());
      AnchorJob job;
      job.plan = &p;
      job.knobs = knobs;
      job.image = p.image.empty() ? BackendFile(s.spec) : ImagePath(p);
      job.scratch_dir = dir_;
      job.vstack = &s.rounds.back();  // this round's, or the previous one's when anchors go first
      job.stop = o_.stop;
      if (prepare == Prepare::kFresh && !p.image.empty()) {
        const std::string tmpl = TemplatePath(p);
        job.make_fresh_image = [tmpl](const std::string& path) -> Status {
          VSTACK_RETURN_IF_ERROR(RemoveFile(path));
          return CopySparse(tmpl, path);
        };
      }
      AnchorRun ar;
      ar.tool = a->name();
      ar.round = round;
      auto res = a->Run(job);
      if (res) {
        ar.result = std::move(*res);
      } else {
        ar.error = res.error().ToString();
      }
      s.anchors.push_back(std::move(ar));
    }
  }

  const MatrixOptions& o_;
  MatrixResult& m_;
  std::string dir_;
  std::map<std::string, ImageState> images_;
};

// The size check of RunMatrix for one stack that brings its own device; "" when it fits. A bad
// option value (Errc::kBadSpec) is set in `bad_spec`: a usage error, before anything runs.
std::string CheckSize(const StackPlan& p, const WorkloadKnobs& k, bool* bad_spec) {
  OpenOptions ro;
  ro.read_only = true;
  auto dev = Open(p.spec, ro);
  if (!dev && dev.error().code == make_error_code(Errc::kBadSpec)) {
    *bad_spec = true;
    return "--stack '" + p.name + "': " + dev.error().ToString();
  }
  if (!dev) return "";  // the round reports why it cannot be opened
  const uint64_t size = (*dev)->geometry().size_bytes;
  if (k.target_size > size) {
    return "--size " + FormatSize(k.target_size) + " is larger than stack '" + p.name +
           "' (" + FormatSize(size) + "): every stack must run on the same region; give --size " +
           FormatSize(size) + " or less";
  }
  const uint64_t region = k.target_size ? k.target_size : size;
  for (BlockDevice* d : StackLayers(**dev)) {
    const std::optional<SpaceUsage> u = d->Space();
    if (!u || d->lower() == nullptr || k.compress_pct > 0 || k.content == Content::kZeros) continue;
    const uint64_t below = d->lower()->geometry().size_bytes;
    const uint64_t room = below > u->metadata_bytes ? below - u->metadata_bytes : 0;
    if (region > room) {
      return "stack '" + p.name + "': " + d->kind() + " has room for " + FormatSize(room) +
             " of data on the " + FormatSize(below) + " " + d->lower()->kind() + " below it (" +
             FormatSize(u->metadata_bytes) + " hold its metadata), less than the " +
             FormatSize(region) + " the fill writes: give a larger device below or a smaller --size";
    }
  }
  return "";
}

}  // namespace

Status CheckStackSizes(const std::vector<StackPlan>& stacks, const WorkloadKnobs& k) {
  for (const StackPlan& p : stacks) {
    if (!p.image.empty() || p.spec.find('{') != std::string::npos) continue;
    if (!MissingComponents(p).empty()) continue;
    bool bad_spec = false;
    if (std::string e = CheckSize(p, k, &bad_spec); !e.empty()) {
      return MakeError(bad_spec ? Errc::kBadSpec : Errc::kInvalidArgument, e);
    }
  }
  return OkStatus();
}

std::string FailingLayer(BlockDevice& top) {
  const std::vector<BlockDevice*> layers = StackLayers(top);
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    BlockDevice* d = *it;
    if (d->Stats().of(Op::kWrite).errors == 0) continue;
    std::string room;
    if (d->lower() != nullptr) {
      const std::optional<SpaceUsage> u = d->Space();
      room = " (" + d->lower()->kind() + " below it has " +
             FormatSize(d->lower()->geometry().size_bytes) +
             (u ? ", " + FormatSize(u->metadata_bytes) + " of it metadata" : std::string()) + ")";
    } else {
      room = " (" + FormatSize(d->geometry().size_bytes) + ")";
    }
    return d->kind() + room;
  }
  return "";
}

MatrixResult RunMatrix(const MatrixOptions& o) {
  MatrixResult m;
  m.knobs = o.knobs;
  m.rounds_planned = o.rounds;
  auto scratch = ScratchDir::Create(o.scratch_parent.empty() ? DefaultScratchParent()
                                                            : o.scratch_parent);
  if (!scratch) {
    m.error = scratch.error().ToString();
    return m;
  }
  m.scratch_dir = scratch->path();
  for (const StackPlan& p : o.stacks) {
    StackOutcome s;
    s.plan = p;
    s.spec = ExpandSpec(p.spec, scratch->path(), o.knobs.target_size);
    std::vector<std::string> missing = MissingComponents(p);
    for (const std::string& c : missing) {
      s.skipped += (s.skipped.empty() ? "needs " : ", ") + ("'" + c + "'");
    }
    if (!missing.empty()) s.skipped += ", not in this build yet";
    m.stacks.push_back(std::move(s));
  }
  if (Status sizes = CheckStackSizes(o.stacks, o.knobs); !sizes) {
    m.error = sizes.error().ToString();
    return m;
  }
  m.auto_rounds = o.auto_rounds;
  m.precision_asked = o.precision;
  m.max_time_s = o.max_time_s;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  MatrixRun run(o, m, scratch->path());
  double last_round_s = 0;
  for (int r = 0; r < o.rounds && !run.Stopped(); ++r) {
    if (o.auto_rounds && r >= o.min_rounds) {
      if (PrecisionReached(Summarize(m), o.precision)) {
        m.rounds_stopped = "the precision was reached";
        break;
      }
      if (since(start) + last_round_s > o.max_time_s) {
        m.rounds_stopped = "the time budget was spent";
        break;
      }
    }
    const Clock::time_point round_start = Clock::now();
    run.RunRound(r);
    last_round_s = since(round_start);
    if (!run.Stopped()) m.rounds_done = r + 1;
  }
  if (o.auto_rounds && m.rounds_stopped.empty() && !run.Stopped()) {
    m.rounds_stopped = "the most rounds (" + std::to_string(o.rounds) + ") were run";
  }
  m.interrupted = run.Stopped();
  return m;
}

}  // namespace vstack::bench
