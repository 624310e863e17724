#include "analysis/sim/sim_stack.h"

#include <algorithm>

#include "analysis/sim/content.h"
#include "blockdev/error/error_device.h"
#include "formats/vhd/vhd_create.h"
#include "formats/vhd/vhd_device.h"
#include "formats/vhd/vhd_parent.h"
#include "formats/vhdx/vhdx_create.h"
#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/size.h"
#include "lib/suggest.h"
#include "lib/sync_io.h"

namespace vstack::sim {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kFixedDiskBytes = 40 * kMiB;  // a disk that cannot grow
const char* const kParentSpec = "vhd+sim:parent";

bool Declares(const std::vector<OptionInfo>& infos, const std::string& name) {
  return std::any_of(infos.begin(), infos.end(), [&](const OptionInfo& i) { return i.name == name; });
}

std::string Names(const std::vector<OptionInfo>& infos) {
  std::string out;
  for (const OptionInfo& i : infos) out += (out.empty() ? "" : ", ") + i.name;
  return out;
}

bool Given(const std::vector<SpecOption>& options, const std::string& key) {
  return std::any_of(options.begin(), options.end(),
                     [&](const SpecOption& o) { return o.key == key; });
}

Error Usage(const std::string& message) { return MakeError(Errc::kInvalidArgument, message); }

// Makes `device`, a simulated disk, a file created at `size` bytes (`vstack create` makes an
// image file at its length; the layers grow it later with Resize, which is not durable).
Status CreatedAt(BlockDevice& device, uint64_t size) {
  VSTACK_RETURN_IF_ERROR(device.Resize(size));
  if (auto* disk = dynamic_cast<SimDevice*>(&device)) disk->disk().SetDurableLength(size);
  return OkStatus();
}

// A new image is durable before the stack opens it, as `vstack create` leaves it (its close
// flushes).
Status Synced(BlockDevice& device) {
  SyncIo io(device);
  if (std::error_code ec = io.Flush()) return MakeError(ec, "sim: flushing the new image failed");
  return OkStatus();
}

bool IsFixed(const std::vector<SpecOption>& create) {
  return std::any_of(create.begin(), create.end(), [](const SpecOption& o) {
    return o.key == "subformat" && o.value == "fixed";
  });
}

}  // namespace

Result<SimStack> SimStack::Parse(std::string_view layers) {
  SimStack stack;
  stack.text_ = std::string(layers);
  VSTACK_ASSIGN_OR_RETURN(std::vector<SpecPart> parts, ParseSpec(layers));
  const Registry& reg = Registry::Global();
  int diffs = 0;
  for (size_t k = parts.size(); k-- > 0;) {
    const SpecPart& sp = parts[k];
    const ComponentInfo* info = reg.Find(sp.name);
    if (info == nullptr) {
      return Usage("--stack: unknown layer '" + sp.name + "'; layers: " +
                   reg.Names(ComponentKind::kLayer) +
                   DidYouMeanComponent(sp.name, ComponentKind::kLayer));
    }
    if (info->kind == ComponentKind::kBackend) {
      return Usage("--stack: '" + sp.name + "' is a backend; --stack names the layers only, and "
                   "the simulator puts them over its simulated disk (sim:disk)");
    }
    if (!sp.positional.empty()) {
      return Usage("--stack: layer '" + sp.name + "' takes only key=value options");
    }
    Part part;
    part.layer.name = sp.name;
    part.formats_below = Declares(info->options, "format");
    if (sp.name == "vhd" || sp.name == "vhdx") part.format = sp.name;
    for (const SpecOption& o : sp.options) {
      if (!part.format.empty() && o.key == "subformat" && o.value == "diff" && sp.name == "vhd") {
        part.diff = true;
        part.create.push_back({"subformat", "dynamic"});
        ++diffs;
      } else if (!part.format.empty() && Declares(info->create_options, o.key)) {
        part.create.push_back(o);
      } else if (Declares(info->options, o.key) || o.key == "stats") {
        if (o.key == "parent" || o.key == "format") {
          return Usage("--stack: option '" + o.key + "' of '" + sp.name +
                       "' is the simulator's to set");
        }
        part.layer.options.push_back(o);
      } else {
        return Usage("--stack: unknown option '" + o.key + "' for '" + sp.name +
                     "'; layer options: " + Names(info->options) +
                     (part.format.empty() ? "" : "; create options: " +
                                                     Names(info->create_options) +
                                                     (sp.name == "vhd" ? " (subformat=diff too)" : "")));
      }
    }
    stack.parts_.push_back(std::move(part));
  }
  if (stack.parts_.empty()) return Usage("--stack: name at least one layer");
  if (diffs > 1) return Usage("--stack: at most one differencing VHD (vhd:subformat=diff)");
  return stack;
}

void SimStack::Prepare(Scheduler& sched, SimRng& rng) {
  clock_ = &sched;
  SimDiskTraits traits;
  traits.resizable = rng.Chance(0.75);
  traits.fua = rng.Chance(0.5);
  traits.write_zeroes = rng.Chance(0.7);
  traits.mem_alignment = rng.Chance(0.5) ? 512 : 1;
  traits.max_transfer = rng.Chance(0.2) ? 64 * 1024 : 0;
  const bool image_at_bottom = !parts_.front().format.empty();
  auto disk = std::make_shared<SimDisk>(image_at_bottom && traits.resizable ? kMiB : kFixedDiskBytes);
  disk->set_fresh(false);  // the first open formats explicitly (format=on), as mkfs would
  sched.SetDisk("disk", {disk, traits});
  image_size_ = rng.Chance(0.5) ? 8 * kMiB : 16 * kMiB;
  parent_seed_ = rng.Next();
  for (Part& part : parts_) {
    auto vary = [&](std::vector<SpecOption>& options, const char* key, const char* value) {
      if (!Given(options, key)) options.push_back({key, value});
    };
    const bool grain = part.formats_below && part.format.empty();
    if (part.format == "vhd") {
      // Small blocks: many allocations and partial blocks; 4 MiB: a grain layer's metadata
      // and data share block 0.
      const char* sizes[] = {"512K", "512K", "2M", "4M"};
      if (!IsFixed(part.create)) vary(part.create, "block_size", sizes[rng.Below(4)]);
      vary(part.layer.options, "reserve", rng.Chance(0.5) ? "0" : rng.Chance(0.5) ? "1M" : "64M");
    } else if (part.format == "vhdx") {
      vary(part.create, "block_size", rng.Chance(0.7) ? "1M" : "2M");
    } else if (grain) {
      vary(part.layer.options, "grain", rng.Chance(0.75) ? "4K" : "8K");
    }
  }
  if (std::any_of(parts_.begin(), parts_.end(), [](const Part& p) { return p.diff; })) {
    SimDiskTraits ptraits = traits;
    ptraits.resizable = true;
    sched.SetDisk("parent", {std::make_shared<SimDisk>(kMiB), ptraits});
  }
}

Status SimStack::MakeParent() {
  VSTACK_ASSIGN_OR_RETURN(DevicePtr file, vstack::Open("sim:parent"));
  vhd::CreateParams p;
  p.requested_size = image_size_;
  p.block_size = 512 * 1024;
  VSTACK_RETURN_IF_ERROR(CreatedAt(*file, vhd::NewImageFileSize(p)));
  VSTACK_RETURN_IF_ERROR(vhd::WriteNewImage(*file, p));
  VSTACK_ASSIGN_OR_RETURN(DevicePtr parent, OpenLayers("vhd", std::move(file)));
  {
    SyncIo io(*parent);
    constexpr size_t kChunk = 256 * 1024;
    AlignedBuffer buf(kChunk, 4096);
    const uint64_t size = parent->size_bytes();
    for (uint64_t at = 0; at < size; at += kChunk) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, size - at));
      FillParent(parent_seed_, at, reinterpret_cast<uint8_t*>(buf.data()), n);
      if (std::error_code ec = io.Write(at, buf.span().first(n))) {
        return MakeError(ec, "sim: filling the parent: " + ec.message());
      }
    }
  }
  return parent->Close();
}

Status SimStack::CreateImage(const Part& part, BlockDevice& below) {
  const bool grows = below.Has(kCapResizable);
  const uint64_t room = below.size_bytes();
  const ComponentInfo* info = Registry::Global().Find(part.format);
  const bool fixed = IsFixed(part.create);
  if (part.format == "vhd") {
    uint64_t size = image_size_;
    if (!grows) size = fixed ? (room - 512) / 512 * 512 : std::min(size, room * 3 / 4 / kMiB * kMiB);
    std::vector<SpecOption> create = part.create;
    if (!grows && !Given(create, "force_size")) create.push_back({"force_size", "on"});
    OptionValues o("vhd", "", create, &info->create_options);
    VSTACK_ASSIGN_OR_RETURN(vhd::CreateParams p, vhd::ParseCreateParams(size, o));
    if (part.diff) {
      OpenOptions ro;
      ro.read_only = true;
      VSTACK_ASSIGN_OR_RETURN(DevicePtr parent, vstack::Open(kParentSpec, ro));
      const vhd::Footer footer = static_cast<const vhd::VhdDevice&>(*parent).image().footer;
      p.requested_size = parent->size_bytes();
      p.parent = vhd::MakeParentLink("parent.vhd", "disk.vhd", footer);
      VSTACK_RETURN_IF_ERROR(parent->Close());
    }
    if (grows) VSTACK_RETURN_IF_ERROR(CreatedAt(below, vhd::NewImageFileSize(p)));
    VSTACK_RETURN_IF_ERROR(vhd::WriteNewImage(below, p));
    return Synced(below);
  }
  uint64_t size = grows ? image_size_ : std::min(image_size_, room / 2 / kMiB * kMiB);
  OptionValues o("vhdx", "", part.create, &info->create_options);
  VSTACK_ASSIGN_OR_RETURN(vhdx::CreateParams p, vhdx::ParseCreateParams(size, o));
  while (!grows && vhdx::NewImageFileSize(p) > room && p.size > kMiB) p.size -= kMiB;
  if (grows) VSTACK_RETURN_IF_ERROR(CreatedAt(below, vhdx::NewImageFileSize(p)));
  VSTACK_RETURN_IF_ERROR(vhdx::WriteNewImage(below, p));
  return Synced(below);
}

Result<DevicePtr> SimStack::OpenPart(const Part& part, DevicePtr below, bool first) {
  if (first && !part.format.empty()) {
    Status created = CreateImage(part, *below);
    if (!created) return Annotate(std::move(created).error(), "sim: creating the " + part.format + " image");
  }
  SpecPart layer = part.layer;
  if (first && part.formats_below) {
    // format=on formats a device whose first 8 KiB are zero (anything else may be a damaged
    // superblock): a differencing VHD below shows its parent's data there, so clear it first,
    // as a user would.
    SyncIo io(*below);
    if (std::error_code ec = io.WriteZeroes(0, std::min<uint64_t>(8192, below->size_bytes()))) {
      return MakeError(ec, "sim: clearing the start of the device below " + part.layer.name);
    }
    layer.options.push_back({"format", "on"});
  }
  if (part.diff) layer.options.push_back({"parent", kParentSpec});
  OpenOptions options;
  options.clock = clock_;
  return OpenLayers(FormatSpecPart(layer), std::move(below), options);
}

Result<DevicePtr> SimStack::Open(bool first) {
  if (first && std::any_of(parts_.begin(), parts_.end(), [](const Part& p) { return p.diff; })) {
    VSTACK_RETURN_IF_ERROR(MakeParent());
  }
  VSTACK_ASSIGN_OR_RETURN(DevicePtr dev, vstack::Open("sim:disk"));
  const BlockDevice* parent = nullptr;  // the differencing VHD's, whose data the sim knows
  for (const Part& part : parts_) {
    VSTACK_ASSIGN_OR_RETURN(dev, OpenPart(part, std::move(dev), first));
    if (const auto* vhd = dynamic_cast<const vhd::VhdDevice*>(dev.get()); vhd && part.diff) {
      parent = vhd->parent();
    }
  }
  if (first) {
    Result<std::vector<ShownRun>> shown = TraceUnwritten(*dev, parent);
    if (shown) {
      shown_ = std::move(*shown);
      unmodelled_.reset();
    } else {
      unmodelled_ = std::move(shown).error();
    }
  }
  NoteInjectors(*dev);
  return dev;
}

void SimStack::NoteInjectors(BlockDevice& top) {
  injectors_.clear();
  for (BlockDevice* d = &top; d != nullptr; d = d->lower()) {
    const auto* e = dynamic_cast<const ErrorDevice*>(d);
    if (e == nullptr || e->config().rate <= 0) continue;
    const bool at_top = d == &top;
    // At the top it fails the kinds it names; a write-type request may still reach it as
    // another (write-zeroes emulated by writes, FUA by a write and a flush): reads apart, the
    // kinds go together.
    constexpr uint32_t kRead = 1u << static_cast<int>(Op::kRead);
    const uint32_t ops = e->config().ops;
    const uint32_t fails = (ops & kRead) | ((ops & ~kRead) != 0 ? ~kRead : 0u);
    injectors_.push_back({e->config().error, at_top ? fails : ~0u, at_top});
  }
}

bool SimStack::MayInject(Op op, std::error_code ec) const {
  return std::any_of(injectors_.begin(), injectors_.end(), [&](const Injector& i) {
    return (i.ops & (1u << static_cast<int>(op))) != 0 && i.Injects(ec);
  });
}

bool SimStack::InjectsBelow(std::error_code ec) const {
  return std::any_of(injectors_.begin(), injectors_.end(),
                     [&](const Injector& i) { return !i.top && i.Injects(ec); });
}

Result<std::vector<uint64_t>> SimStack::InitialContent(uint64_t units) const {
  if (unmodelled_) {
    return Annotate(*unmodelled_,
                    "the simulator cannot tell what the stack shows before any write");
  }
  std::vector<uint64_t> content(units, ZeroUnitHash());
  uint8_t unit[kUnit];
  for (const ShownRun& run : shown_) {
    if (!run.parent) continue;
    for (uint64_t at = 0; at < run.length && (run.offset + at) / kUnit < units; at += kUnit) {
      FillParent(parent_seed_, run.parent_offset + at, unit, kUnit);
      content[(run.offset + at) / kUnit] = UnitHash(unit);
    }
  }
  return content;
}

void SimStack::PowerCut(Scheduler& sched, SimRng& rng, double land, double torn) {
  SimDiskEntry* entry = sched.Disk("disk");
  std::shared_ptr<SimDisk> after = entry->disk->AfterPowerCut(rng, land, torn);
  sched.SetDisk("disk", {after, entry->traits});
}

}  // namespace vstack::sim
