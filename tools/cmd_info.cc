// vstack info [--output=json] [--backing-chain] SPEC|FILE: geometry, capabilities and the
// layer chain of a stack, with each layer's own facts (Properties); with --backing-chain, the
// same for every image of a differencing-VHD chain, top first (qemu-img info --backing-chain;
// BackingChain, imagetools/map.h). The JSON document is the library's InfoJson
// (imagetools/info.h).
#include <fmt/format.h>

#include "imagetools/info.h"
#include "imagetools/map.h"
#include "lib/registry.h"
#include "lib/size.h"
#include "lib/spec.h"
#include "tools/command.h"
#include "tools/image_args.h"
#include "tools/output.h"

namespace vstack::cli {
namespace {

struct InfoArgs {
  std::string target;
  OutputFormat output = OutputFormat::kText;
  bool backing_chain = false;
  bool force_share = false;
};

std::string Limit(uint64_t v) { return v ? std::to_string(v) + " (" + FormatSize(v) + ")" : "unlimited"; }

void PrintText(const std::string& spec, BlockDevice& dev) {
  const Geometry& g = dev.geometry();
  fmt::print("stack:            {}\n", spec);
  fmt::print("virtual size:     {} ({})\n", g.size_bytes, FormatSize(g.size_bytes));
  fmt::print("logical block:    {}\n", g.logical_block);
  fmt::print("physical block:   {}\n", g.physical_block);
  fmt::print("memory alignment: {}\n", g.mem_alignment);
  fmt::print("max transfer:     {}\n", Limit(g.max_transfer));
  if (g.optimal_transfer) fmt::print("optimal transfer: {}\n", FormatSize(g.optimal_transfer));
  fmt::print("capabilities:     {}\n", CapabilitiesToString(dev.capabilities()));
  fmt::print("layers (top first):\n");
  int level = 0;
  for (BlockDevice* d : StackChain(dev)) {
    fmt::print("  [{}] {:<12} {}\n", level++, d->kind(), d->Describe());
    PropertyList props;
    d->Properties(props);
    size_t width = 0;
    for (const Property& p : props) width = std::max(width, p.key.size());
    for (const Property& p : props) {
      fmt::print("        {:<{}}  {}\n", p.key, width, PropertyText(p));
    }
  }
}

// True for a spec whose bottom asks to create its file (`file:PATH,create=on,size=...`, or
// create=true/yes/1): info then opens it writable, as that is the only way to create it;
// anything else is read-only. create=no/false/0 does not ask, and a bad value (create=maybe)
// neither: the read-only open refuses it with the backend's own error.
bool AsksToCreate(const std::string& target) {
  auto parts = ParseSpec(target);
  if (!parts || parts->empty()) return false;
  const SpecPart& bottom = parts->back();
  const OptionValues values(bottom.name, bottom.positional, bottom.options, nullptr);
  const Result<bool> create = values.Bool("create");
  return create && *create;
}

}  // namespace

void AddInfoCommand(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "info", "Show a stack's geometry, capabilities and layers (a spec, or an image file)");
  cmd->add_option("target", args->target, "stack spec (e.g. vhd+file:d.vhd) or image file")
      ->required();
  AddOutputOption(cmd, &args->output);
  cmd->add_flag("--backing-chain", args->backing_chain,
                "also show every parent of a differencing VHD, top first");
  AddForceShareFlag(cmd, &args->force_share);
  cmd->callback([args] {
    std::string spec;
    OpenOptions open;
    open.read_only = !AsksToCreate(args->target);
    open.force_share = args->force_share;
    auto dev = OpenImage(args->target, open, &spec);
    if (!dev) Fail("info", dev.error());
    std::vector<ChainImage> images = {{spec, dev->get()}};
    if (args->backing_chain) images = BackingChain(spec, **dev);
    if (args->output == OutputFormat::kJson) {
      fmt::print("{}\n", args->backing_chain ? BackingChainInfoJson(spec, **dev)
                                              : InfoJson(spec, **dev));
      return;
    }
    for (size_t i = 0; i < images.size(); ++i) {
      if (i > 0) fmt::print("\n");
      PrintText(images[i].spec, *images[i].device);
    }
  });
}

}  // namespace vstack::cli
