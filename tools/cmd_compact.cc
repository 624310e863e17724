// vstack compact [-p] FILE: gives back the all-zero blocks of a dynamic VHD or VHDX, moves blocks
// from the end of the file into the holes, and truncates the file (formats/vhd/vhd_compact.h,
// formats/vhdx/vhdx_compact.h). FILE may also be a spec `vhd+BACKEND...` or `vhdx+BACKEND...`;
// the image must not be open elsewhere.
#include <fmt/format.h>

#include "formats/vhd/vhd_compact.h"
#include "formats/vhd/vhd_image.h"
#include "formats/vhdx/vhdx_compact.h"
#include "formats/vhdx/vhdx_image.h"
#include "lib/registry.h"
#include "lib/size.h"
#include "lib/spec.h"
#include "tools/command.h"
#include "tools/progress.h"

namespace vstack::cli {

void AddCompactCommand(CLI::App& app) {
  auto target = std::make_shared<std::string>();
  auto progress = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "compact", "Give back the all-zero blocks of a dynamic VHD or VHDX and shrink the file");
  cmd->add_flag("-p,--progress", *progress, "show a progress bar");
  cmd->add_option("target", *target, "dynamic VHD or VHDX file, or vhd+BACKEND / vhdx+BACKEND spec")
      ->required();
  cmd->callback([target, progress] {
    std::string below;
    if (IsStackSpec(*target)) {
      auto parts = ParseSpec(*target);
      if (!parts || parts->size() < 2 ||
          ((*parts)[0].name != "vhd" && (*parts)[0].name != "vhdx")) {
        Fail("compact", "'" + *target + "' is not a vhd+BACKEND or vhdx+BACKEND spec");
      }
      parts->erase(parts->begin());
      below = FormatSpec(*parts);
    } else {
      below = FormatSpecPart(SpecPart{"file", *target, {}});
    }
    auto file = Open(below);
    if (!file) Fail("compact", file.error().ToString());
    const bool vhdx = vhdx::ProbeImage(**file);
    if (!vhdx && !vhd::ProbeImage(**file)) {
      Fail("compact", "'" + *target + "' is not a VHD or VHDX image");
    }
    // One bar per stage, counting blocks: "compact: scan" then "compact: move".
    std::unique_ptr<Progress> bar;
    bool scanning = true;
    auto on_progress = [&](auto s, uint64_t done, uint64_t total) {
      const bool scan = s == decltype(s)::kScan;
      if (!bar || scan != scanning) {
        bar.reset();
        scanning = scan;
        bar = std::make_unique<Progress>(scan ? "compact: scan" : "compact: move", total, *progress,
                                         "blocks");
      }
      bar->Set(done);
    };
    auto finish = [&](const auto& report) {
      bar.reset();
      if (!report) Fail("compact", report.error().ToString());
      Status closed = (*file)->Close();
      if (!closed) Fail("compact", closed.error().ToString());
      fmt::print("{}: {} all-zero block(s) freed of {}, {} block(s) moved; file {} -> {}\n",
                 *target, report->zero_blocks_freed, report->blocks_before, report->blocks_moved,
                 FormatSize(report->file_size_before), FormatSize(report->file_size_after));
    };
    if (vhdx) {
      finish(vhdx::CompactImage(**file, on_progress));
    } else {
      finish(vhd::CompactImage(**file, on_progress));
    }
  });
}

}  // namespace vstack::cli
