// The one check of `vstack space`'s knobs (SpaceKnobs, space.h): what the command line and the
// Python module hand to the analysis, so both refuse the same options with the same words.
#ifndef VSTACK_ANALYSIS_SPACE_KNOBS_H_
#define VSTACK_ANALYSIS_SPACE_KNOBS_H_

#include <cstdint>
#include <string>

#include "analysis/space/space.h"
#include "analysis/space/space_model.h"
#include "lib/errors.h"

namespace vstack {

// The options of the analysis, every knob checked. Errors (kInvalidArgument, a usage error) are
// the command line's words and name the flag: "--grain 3K: not a power of two from 4K to 64K".
Result<SpaceOptions> SpaceOptionsFrom(const SpaceKnobs& knobs);

// "1%" or "0.01" -> 0.01: a fraction in (0, 1]; errors name `flag`.
Result<double> ParseFraction(const std::string& flag, const std::string& text);

// The note a report carries when --scope groups=N puts every one of `images` images in a group
// of its own (the same as --scope image); "" otherwise.
std::string ScopeNote(const SpaceOptions& o, size_t images);

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_KNOBS_H_
