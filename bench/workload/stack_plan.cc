#include "bench/workload/stack_plan.h"

#include <algorithm>
#include <cstdlib>

#include "lib/registry.h"
#include "lib/spec.h"
#include "lib/spec_check.h"
#include "lib/suggest.h"

namespace vstack::bench {

const char* PrepareName(Prepare p) {
  switch (p) {
    case Prepare::kAuto: return "auto";
    case Prepare::kFill: return "fill";
    case Prepare::kFresh: return "fresh";
    case Prepare::kNone: return "none";
  }
  return "?";
}

Result<Prepare> ParsePrepare(const std::string& text) {
  for (Prepare p : {Prepare::kAuto, Prepare::kFill, Prepare::kFresh, Prepare::kNone}) {
    if (text == PrepareName(p)) return p;
  }
  return MakeError(Errc::kInvalidArgument,
                   "--prepare: '" + text + "' is not one of auto, fill, fresh, none");
}

namespace {

StackPlan NamedStack(const BackendChoice& b, std::string name, std::string layers, std::string image,
                 std::string format, std::string options, Prepare prepare) {
  StackPlan p;
  p.name = std::move(name);
  p.image = image;
  p.image_format = format;
  p.image_options = options;
  p.prepare = prepare;
  p.spec = layers + b.backend + ":{dir}/" + image + (b.direct ? ",direct=on" : "");
  p.components = {b.backend};
  if (format != "raw") p.components.push_back(format);
  auto parts = ParseSpec(layers.empty() ? std::string() : layers.substr(0, layers.size() - 1));
  if (!layers.empty() && parts) {
    for (const SpecPart& part : *parts) p.components.push_back(part.name);
  }
  std::sort(p.components.begin(), p.components.end());
  p.components.erase(std::unique(p.components.begin(), p.components.end()), p.components.end());
  if (layers.empty()) p.raw_file = true;
  if (layers.empty() && format == "raw") p.qemu_format = "raw";
  if (layers == "vhd+" && format == "vhd") p.qemu_format = "vpc";
  if (layers == "vhdx+" && format == "vhdx") p.qemu_format = "vhdx";
  return p;
}

// On the images tools/ceph-up creates in its cluster ($CEPH_CONF): rbd/bench-rep (data in the
// replicated pool), rbd/bench-ec and rbd/bench-ec-dz (data in EC 2+1). docs/layers/rbd.md.
void AddCephStacks(std::vector<StackPlan>& v) {
  const struct {
    const char* name;
    const char* spec;
    const char* note;
  } ceph[] = {
      {"rbd-replicated", "rbd:rbd/bench-rep", "RBD image, data 2x replicated (tools/ceph-up)"},
      {"rbd-ec", "rbd:rbd/bench-ec", "RBD image, data in EC k=2 m=1 (tools/ceph-up)"},
      {"dedup+zstd-rbd-ec", "dedup+zstd:size={size:1.25},format=on+rbd:rbd/bench-ec-dz",
       "dedup+zstd over an RBD image with its data in EC 2+1 (tools/ceph-up)"},
  };
  for (const auto& c : ceph) {
    StackPlan p;
    p.name = c.name;
    p.spec = c.spec;
    p.prepare = Prepare::kFill;
    p.components = {"rbd"};
    if (std::string(c.spec).starts_with("dedup")) p.components = {"dedup", "rbd", "zstd"};
    p.note = c.note;
    v.push_back(std::move(p));
  }
}

}  // namespace

std::vector<StackPlan> NamedStacks(const BackendChoice& b) {
  std::vector<StackPlan> v;
  v.push_back(NamedStack(b, "raw", "", "raw.img", "raw", "", Prepare::kFill));
  v.back().note = "the baseline";
  v.push_back(NamedStack(b, "passthrough", "passthrough+", "raw.img", "raw", "", Prepare::kFill));
  v.push_back(NamedStack(b, "vhd-fixed", "vhd+", "fixed.vhd", "vhd", "subformat=fixed", Prepare::kFill));
  v.push_back(NamedStack(b, "vhd-dynamic", "vhd+", "dynamic.vhd", "vhd", "subformat=dynamic",
                     Prepare::kFill));
  v.back().note = "every block allocated before the first round";
  v.push_back(NamedStack(b, "vhd-dynamic-fresh", "vhd+", "fresh.vhd", "vhd", "subformat=dynamic",
                     Prepare::kFresh));
  v.back().note = "a freshly created image every round: first writes allocate; no warm-up";
  for (const char* name : {"dedup", "zstd", "dedup+zstd"}) {
    std::string file = name;
    for (char& c : file) if (c == '+') c = '-';
    // The scratch file is created before the stack opens it, so the layer that formats it is
    // told to (format=on formats only a device without a superblock: later rounds reopen).
    const std::string layers = std::string(name) + ":format=on+";
    v.push_back(NamedStack(b, name, layers, file + ".img", "raw", "", Prepare::kFill));
    v.back().image_scale = 1.5;  // room for the layer's metadata below its virtual size
  }
  v.push_back(NamedStack(b, "raw-fresh", "", "sparse.img", "raw", "", Prepare::kFresh));
  v.back().note = "a sparse raw file every round: the fair baseline for vhd-dynamic-fresh";
  v.push_back(NamedStack(b, "raw-copy", "", "raw-copy.img", "raw", "", Prepare::kFill));
  v.back().note = "raw again, on a file of its own: the A/A check (must not differ from raw)";
  // VHDX (docs/layers/vhdx.md), on request like raw-fresh.
  v.push_back(NamedStack(b, "vhdx-fixed", "vhdx+", "fixed.vhdx", "vhdx", "subformat=fixed",
                     Prepare::kFill));
  v.push_back(NamedStack(b, "vhdx-dynamic", "vhdx+", "dynamic.vhdx", "vhdx", "subformat=dynamic",
                     Prepare::kFill));
  v.back().note = "every block allocated before the first round";
  v.push_back(NamedStack(b, "vhdx-dynamic-fresh", "vhdx+", "fresh.vhdx", "vhdx",
                     "subformat=dynamic", Prepare::kFresh));
  v.back().note = "a freshly created image every round: first writes allocate through the log";
  for (int levels : {1, 8}) {
    const std::string name = "vhd-diff-" + std::to_string(levels);
    v.push_back(NamedStack(b, name, "vhd+", name + ".vhd", "vhd", "", Prepare::kNone));
    v.back().diff_levels = levels;
    v.back().qemu_format.clear();  // qemu's vpc driver ignores parents
    v.back().note = "differencing, " + std::to_string(levels) +
                    (levels == 1 ? " level" : " levels") +
                    " over a filled dynamic VHD; the levels are new (empty) every round";
  }
  AddCephStacks(v);
  // raw-fresh and every named stack after it (VHDX, differencing VHD, Ceph) are on request only.
  for (auto it = std::find_if(v.begin(), v.end(),
                              [](const StackPlan& p) { return p.name == "raw-fresh"; });
       it != v.end(); ++it) {
    it->in_default_matrix = false;
  }
  return v;
}

std::vector<StackPlan> DefaultMatrix(const BackendChoice& b) {
  std::vector<StackPlan> v;
  for (StackPlan& p : NamedStacks(b)) {
    if (p.in_default_matrix) v.push_back(std::move(p));
  }
  return v;
}

std::vector<std::string> NamedStackNames() {
  std::vector<std::string> names;
  for (const StackPlan& p : NamedStacks(BackendChoice{})) names.push_back(p.name);
  return names;
}

Result<StackPlan> ResolveStack(const std::string& text, const BackendChoice& b) {
  for (StackPlan& p : NamedStacks(b)) {
    if (p.name == text) return std::move(p);
  }
  auto parts = ParseSpec(text);
  if (!parts) return MakeError(Errc::kInvalidArgument, "--stack: " + parts.error().message);
  std::string names;
  for (const std::string& n : NamedStackNames()) names += (names.empty() ? "" : ", ") + n;
  const SpecPart& bottom = parts->back();
  const ComponentInfo* backend = Registry::Global().Find(bottom.name);
  if (parts->size() == 1 && bottom.positional.empty() && backend == nullptr) {
    return MakeError(Errc::kInvalidArgument,
                     "--stack: '" + text + "' is neither a named stack (" + names +
                         ") nor a stack spec (e.g. passthrough+memory:1G)");
  }
  if (backend == nullptr || backend->kind != ComponentKind::kBackend) {
    return MakeError(Errc::kInvalidArgument,
                     "--stack '" + text + "': '" + bottom.name + "' is not a backend (" +
                         Registry::Global().Names(ComponentKind::kBackend) + ")");
  }
  StackPlan p;
  p.name = text;
  p.spec = text;
  p.prepare = Prepare::kAuto;
  for (size_t i = 0; i < parts->size(); ++i) {
    const SpecPart& part = (*parts)[i];
    const ComponentInfo* c = Registry::Global().Find(part.name);
    if (c == nullptr || (i + 1 < parts->size() && c->kind != ComponentKind::kLayer)) {
      return MakeError(Errc::kInvalidArgument,
                       "--stack '" + text + "': unknown layer '" + part.name + "' (" +
                           Registry::Global().Names(ComponentKind::kLayer) + ")" +
                           DidYouMeanComponent(part.name, ComponentKind::kLayer));
    }
    p.components.push_back(part.name);
  }
  // Option names too, before anything runs (their values are checked by the open).
  if (Status names = CheckSpecNames(text); !names) {
    return MakeError(Errc::kBadSpec, "--stack '" + text + "': " + names.error().ToString());
  }
  if (parts->size() == 1 && (bottom.name == "file" || bottom.name == "uring")) {
    p.raw_file = true;
    p.qemu_format = "raw";
  }
  return p;
}

WorkloadKnobs PlanKnobs(const StackPlan& plan, Prepare prepared, WorkloadKnobs k) {
  if (plan.cpu_ready_pct >= 0) k.cpu_ready_pct = plan.cpu_ready_pct;
  if (!plan.ready_stall.empty()) k.ready_stall = plan.ready_stall;
  if (plan.duration_s > 0 && k.io_count == 0) k.duration_s = plan.duration_s;
  if (prepared == Prepare::kFresh) k.warmup_s = 0;
  return k;
}

std::vector<std::string> MissingComponents(const StackPlan& plan) {
  std::vector<std::string> missing;
  for (const std::string& c : plan.components) {
    const ComponentInfo* info = Registry::Global().Find(c);
    const bool needs_create = c == plan.image_format;
    if (info == nullptr || (needs_create && !info->create)) missing.push_back(c);
  }
  return missing;
}

std::string ExpandSpec(std::string text, const std::string& dir, uint64_t target_size) {
  for (size_t pos; (pos = text.find("{dir}")) != std::string::npos;) text.replace(pos, 5, dir);
  for (size_t pos; (pos = text.find("{size:")) != std::string::npos;) {
    const size_t end = text.find('}', pos);
    if (end == std::string::npos) break;
    const double factor = std::strtod(text.c_str() + pos + 6, nullptr);
    const uint64_t bytes = static_cast<uint64_t>(double(target_size) * factor) >> 20 << 20;
    text.replace(pos, end + 1 - pos, std::to_string(bytes));
  }
  return text;
}

std::string BackendFile(const std::string& spec) {
  auto parts = ParseSpec(spec);
  if (!parts || parts->size() != 1) return "";
  const SpecPart& p = parts->front();
  return p.name == "file" || p.name == "uring" ? p.positional : "";
}

}  // namespace vstack::bench
