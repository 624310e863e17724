// What `vstack serve` reports when it stops: the requests each layer of the served stack
// handled, as a text table (stderr) and as JSON (the stats= file). Both come from the same
// LayerStats snapshots.
#ifndef VSTACK_TOOLS_NBD_SERVE_REPORT_H_
#define VSTACK_TOOLS_NBD_SERVE_REPORT_H_

#include <nlohmann/json.hpp>

#include <string>

#include "lib/block_device.h"

namespace vstack::nbd {

// One row per layer, top first: requests and bytes per operation, and errors.
std::string ServeSummaryText(const std::string& spec, BlockDevice& top, double seconds);

// {"spec", "seconds", "layers": [{"kind", "description", "stats"}]} with the library's
// LayerStats JSON for each layer (imagetools/info_json.h, as in Python's Device.stats()).
nlohmann::json ServeSummaryJson(const std::string& spec, BlockDevice& top, double seconds);

}  // namespace vstack::nbd

#endif  // VSTACK_TOOLS_NBD_SERVE_REPORT_H_
