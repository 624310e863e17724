// vstack compact [-p] FILE: gives back the all-zero blocks of a dynamic VHD or VHDX, moves blocks
// from the end of the file into the holes, and truncates the file (CompactImage,
// imagetools/compact.h). FILE may also be a spec `vhd+BACKEND...` or `vhdx+BACKEND...`; the
// image must not be open elsewhere.
#include <fmt/format.h>

#include "imagetools/compact.h"
#include "lib/size.h"
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
    // One bar per stage, counting blocks: "compact: scan" then "compact: move".
    std::unique_ptr<Progress> bar;
    CompactStage shown = CompactStage::kScan;
    auto on_progress = [&](CompactStage stage, uint64_t done, uint64_t total) {
      if (!bar || stage != shown) {
        bar.reset();
        shown = stage;
        bar = std::make_unique<Progress>(
            stage == CompactStage::kScan ? "compact: scan" : "compact: move", total, *progress,
            "blocks");
      }
      bar->Set(done);
    };
    Result<CompactReport> report = CompactImage(*target, on_progress);
    bar.reset();
    if (!report) Fail("compact", report.error());
    fmt::print("{}: {} all-zero block(s) freed of {}, {} block(s) moved; file {} -> {}\n", *target,
               report->zero_blocks_freed, report->blocks_before, report->blocks_moved,
               FormatSize(report->file_size_before), FormatSize(report->file_size_after));
  });
}

}  // namespace vstack::cli
