// Spans of time as flags and spec options write them: "500ms", "80us", "1.5s", "2m", "0". The one
// parser behind `vstack bench`'s --duration, --warmup, --quantum and --max-time and the emulation
// layers' service times (blockdev/emulation/service_time.h).
#ifndef VSTACK_LIB_DURATION_H_
#define VSTACK_LIB_DURATION_H_

#include <cstdint>
#include <string>

#include "lib/errors.h"

namespace vstack {

// What a number written without a unit means.
enum class BareNumber {
  kSeconds,   // "2" is 2 s (vstack bench's flags, like fio's runtime=)
  kZeroOnly,  // only "0" may go without a unit (the layers' options: no guessing between ms and us)
};

// The longest duration ParseDuration accepts, in nanoseconds: 1,000,000 s (about 11.6 days).
inline constexpr double kMaxDurationNs = 1e15;

// A decimal number and a unit: ns, us (or µs), ms, s, m or min. Returns nanoseconds, rounded to
// the nearest; not negative, at most kMaxDurationNs. Errors (kInvalidArgument) name the text
// and what is wrong: "'5xs' is not a duration (e.g. 5ms, 80us, 1.5s, 0)", "'-1ms' is
// negative", "'9223372036s' is too long: at most 1000000s (about 11.6 days)".
Result<uint64_t> ParseDuration(const std::string& text, BareNumber bare);

}  // namespace vstack

#endif  // VSTACK_LIB_DURATION_H_
