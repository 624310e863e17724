#include "bench/workload/matrix.h"

#include <map>

#include "bench/workload/image_setup.h"
#include "bench/workload/stack_stats.h"
#include "lib/registry.h"

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
    o_.on_progress(MatrixProgress{round, o_.rounds, s.plan.name, activity, p});
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

  void RunStack(StackOutcome& s, int round, WorkloadKnobs knobs) {
    const StackPlan& p = s.plan;
    Report(s, round, "preparing");
    if (Status st = MakeImage(p, knobs); !st) {
      s.error = "creating the image: " + st.error().ToString();
      return;
    }
    auto dev = Open(s.spec);
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
    const std::string key = p.image.empty() ? s.spec : p.image;
    if (prepare == Prepare::kFill && (starts_empty || !images_[key].filled)) {
      Report(s, round, "filling");
      if (Status st = FillDevice(**dev, knobs, o_.stop); !st) {
        s.error = st.error().ToString();
        return;
      }
      images_[key].filled = true;
    }
    if (prepare == Prepare::kFresh) knobs.warmup_s = 0;  // the first writes are the point

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
    if (!s.error.empty() || s.rounds.back().interrupted) return;
    RunAnchors(s, round, knobs, prepare);
  }

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
      job.vstack = &s.rounds.back();
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

}  // namespace

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
  MatrixRun run(o, m, scratch->path());
  for (int r = 0; r < o.rounds && !run.Stopped(); ++r) {
    run.RunRound(r);
    if (!run.Stopped()) m.rounds_done = r + 1;
  }
  m.interrupted = run.Stopped();
  return m;
}

}  // namespace vstack::bench
