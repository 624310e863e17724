// vstack map [--output=json] FILE|SPEC: the allocation of the virtual disk (MapExtents), as
// extents of data, zeros (allocated, reading as zeros) and holes (not allocated; reading as
// zeros), like qemu-img map. For a differencing-VHD chain each extent also names the level
// (0 = the top image) and file that holds it, as qemu-img map's "depth" (MapImage,
// imagetools/map.h).
#include <fmt/format.h>

#include <algorithm>

#include "imagetools/map.h"
#include "lib/plural.h"
#include "lib/registry.h"
#include "lib/size.h"
#include "tools/command.h"
#include "tools/image_args.h"
#include "tools/output.h"

namespace vstack::cli {
namespace {

std::string TypeOf(uint32_t flags) {
  if (flags & kExtentHole) return "hole";
  if (flags & kExtentZero) return "zero";
  return "data";
}

}  // namespace

void AddMapCommand(CLI::App& app) {
  auto target = std::make_shared<std::string>();
  auto output = std::make_shared<OutputFormat>(OutputFormat::kText);
  auto force_share = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("map", "Show which ranges of an image hold data");
  cmd->add_option("target", *target, "image file or stack spec")->required();
  AddOutputOption(cmd, output.get());
  AddForceShareFlag(cmd, force_share.get());
  cmd->callback([target, output, force_share] {
    OpenOptions ro;
    ro.read_only = true;
    ro.force_share = *force_share;
    std::string spec;
    auto dev = OpenImage(*target, ro, &spec);
    if (!dev) Fail("map", dev.error());
    Result<ImageMap> map = MapImage(**dev);
    if (!map) Fail("map", map.error());
    const bool chain = map->chain;
    const std::vector<ImageExtent>& extents = map->extents;
    const uint64_t data = map->data_bytes();
    if (*output == OutputFormat::kJson) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& e : extents) {
        nlohmann::json j = {{"start", e.offset},
                            {"length", e.length},
                            {"type", TypeOf(e.flags)},
                            {"data", (e.flags & kExtentZero) == 0},
                            {"zero", (e.flags & kExtentZero) != 0},
                            {"hole", (e.flags & kExtentHole) != 0}};
        if (chain) {
          j["depth"] = e.level;
          j["file"] = e.file;
        }
        arr.push_back(j);
      }
      nlohmann::json j = {{"spec", spec},
                          {"size", (*dev)->geometry().size_bytes},
                          {"data_bytes", data},
                          {"extents", arr}};
      fmt::print("{}\n", j.dump(2));
      return;
    }
    TextTable table = chain ? TextTable({"Offset", "Length", "Type", "Level", "File"},
                                        {true, true, false, true, false})
                            : TextTable({"Offset", "Length", "Type"}, {true, true, false});
    for (const auto& e : extents) {
      std::vector<std::string> row = {fmt::format("{:#x}", e.offset),
                                      fmt::format("{:#x}", e.length), TypeOf(e.flags)};
      if (chain) {
        row.push_back(e.level < 0 ? "-" : std::to_string(e.level));
        row.push_back(e.file);
      }
      table.AddRow(row);
    }
    fmt::print("{}", table.Render());
    const auto data_extents =
        std::count_if(extents.begin(), extents.end(), [](const auto& e) { return e.flags == 0; });
    fmt::print("{} of {} hold data ({} of {})\n", FormatSize(data),
               FormatSize((*dev)->geometry().size_bytes),
               Counted(static_cast<uint64_t>(data_extents), "data extent", "data extents"),
               Counted(extents.size(), "extent", "extents"));
  });
}

}  // namespace vstack::cli
