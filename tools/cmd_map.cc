// vstack map [--output=json] FILE|SPEC: the allocation of the virtual disk (MapExtents), as
// extents of data, zeros (allocated, reading as zeros) and holes (not allocated; reading as
// zeros), like qemu-img map.
#include <fmt/format.h>

#include "lib/registry.h"
#include "lib/size.h"
#include "tools/command.h"
#include "tools/output.h"

namespace vstack::cli {
namespace {

std::string TypeOf(const Extent& e) {
  if (e.flags & kExtentHole) return "hole";
  if (e.flags & kExtentZero) return "zero";
  return "data";
}

}  // namespace

void AddMapCommand(CLI::App& app) {
  auto target = std::make_shared<std::string>();
  auto output = std::make_shared<OutputFormat>(OutputFormat::kText);
  CLI::App* cmd = app.add_subcommand("map", "Show which ranges of an image hold data");
  cmd->add_option("target", *target, "image file or stack spec")->required();
  AddOutputOption(cmd, output.get());
  cmd->callback([target, output] {
    OpenOptions ro;
    ro.read_only = true;
    std::string spec;
    auto dev = OpenImage(*target, ro, &spec);
    if (!dev) Fail("map", dev.error().ToString());
    std::vector<Extent> extents;
    Status s = (*dev)->MapExtents(0, (*dev)->geometry().size_bytes, &extents);
    if (!s) Fail("map", s.error().ToString());
    uint64_t data = 0;
    for (const Extent& e : extents) data += e.flags ? 0 : e.length;
    if (*output == OutputFormat::kJson) {
      nlohmann::json arr = nlohmann::json::array();
      for (const Extent& e : extents) {
        arr.push_back({{"start", e.offset},
                       {"length", e.length},
                       {"type", TypeOf(e)},
                       {"data", (e.flags & kExtentZero) == 0},
                       {"zero", (e.flags & kExtentZero) != 0},
                       {"hole", (e.flags & kExtentHole) != 0}});
      }
      nlohmann::json j = {{"spec", spec},
                          {"size", (*dev)->geometry().size_bytes},
                          {"data_bytes", data},
                          {"extents", arr}};
      fmt::print("{}\n", j.dump(2));
      return;
    }
    TextTable table({"Offset", "Length", "Type"}, {true, true, false});
    for (const Extent& e : extents) {
      table.AddRow({fmt::format("{:#x}", e.offset), fmt::format("{:#x}", e.length), TypeOf(e)});
    }
    fmt::print("{}", table.Render());
    fmt::print("{} of {} hold data ({} extents)\n", FormatSize(data),
               FormatSize((*dev)->geometry().size_bytes), extents.size());
  });
}

}  // namespace vstack::cli
