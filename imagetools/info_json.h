// The JSON values behind imagetools/info.h, for the CLI's reports that embed them in larger
// documents (`vstack serve`'s summary). Not installed: nlohmann-json stays out of the public API.
#ifndef VSTACK_IMAGETOOLS_INFO_JSON_H_
#define VSTACK_IMAGETOOLS_INFO_JSON_H_

#include <nlohmann/json.hpp>

#include <string>

#include "imagetools/info.h"
#include "lib/stats.h"

namespace vstack {

// One layer's statistics: {"ops": {op: {ops, bytes, errors, latency_ns: {mean, p50, p99,
// max}}}, "in_flight", "counters": {name: value}}. `latency`: the layer keeps latency
// (StatsMode::kLatency); when it does not, an op's latency_ns is null rather than zeros (unless
// queues that kept it recorded some), so that no reader takes "not measured" for "0 ns".
nlohmann::json LayerStatsJson(const LayerStats& stats, bool latency);

// LayerStatsJson of `d`, with what its statistics mode says of latency.
nlohmann::json LayerStatsJson(const BlockDevice& d);

// InfoJson's document as a value.
nlohmann::json InfoJsonValue(const std::string& spec, BlockDevice& top,
                             const InfoOptions& options = {});

}  // namespace vstack

#endif  // VSTACK_IMAGETOOLS_INFO_JSON_H_
