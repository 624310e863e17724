// The one duration parser (lib/duration.h): every unit, what a bare number means to each kind of
// caller, and the inputs it refuses.
#include "lib/duration.h"

#include <gtest/gtest.h>

namespace vstack {
namespace {

TEST(ParseDuration, EveryUnitScalesToNanoseconds) {
  const std::pair<const char*, uint64_t> cases[] = {
      {"250ns", 250},          {"80us", 80'000},           {"80µs", 80'000},
      {"5ms", 5'000'000},      {"254.4us", 254'400},       {"1.5s", 1'500'000'000},
      {"2m", 120'000'000'000}, {"1min", 60'000'000'000},   {"0", 0},
      {"0.0", 0},              {"1e3ms", 1'000'000'000}};
  for (const auto& [text, ns] : cases) {
    for (BareNumber bare : {BareNumber::kSeconds, BareNumber::kZeroOnly}) {
      auto v = ParseDuration(text, bare);
      ASSERT_TRUE(v) << text << ": " << v.error().message;
      EXPECT_EQ(*v, ns) << text;
    }
  }
}

TEST(ParseDuration, ABareNumberIsSecondsOnlyWhereTheCallerSaysSo) {
  EXPECT_EQ(ParseDuration("2", BareNumber::kSeconds).value(), 2'000'000'000u);
  EXPECT_EQ(ParseDuration("0.5", BareNumber::kSeconds).value(), 500'000'000u);
  auto bare = ParseDuration("5", BareNumber::kZeroOnly);  // 5 what? ms and us are both likely
  ASSERT_FALSE(bare);
  EXPECT_EQ(bare.error().message, "'5' is not a duration (e.g. 5ms, 80us, 1.5s, 0)");
  EXPECT_EQ(bare.error().code, make_error_code(Errc::kInvalidArgument));
}

TEST(ParseDuration, RefusesWhatIsNotADuration) {
  for (const char* text : {"", "ms", "2parsecs", "5 ms", "-1s", "-2", "nan", "infs", "1e300s",
                           "12d", "5xs", "1.5.2s"}) {
    for (BareNumber bare : {BareNumber::kSeconds, BareNumber::kZeroOnly}) {
      auto v = ParseDuration(text, bare);
      EXPECT_FALSE(v) << "'" << text << "' was taken as " << (v ? *v : 0) << " ns";
    }
  }
  // At most 1e15 ns, about 11.6 days: a longer one is a typo, not a benchmark.
  EXPECT_TRUE(ParseDuration("1000000s", BareNumber::kSeconds));
  EXPECT_FALSE(ParseDuration("1000001s", BareNumber::kSeconds));
  // Each refusal says what is wrong: an overflow is not "not a duration".
  EXPECT_EQ(ParseDuration("9223372036s", BareNumber::kZeroOnly).error().message,
            "'9223372036s' is too long: at most 1000000s (about 11.6 days)");
  EXPECT_EQ(ParseDuration("-1ms", BareNumber::kZeroOnly).error().message, "'-1ms' is negative");
  EXPECT_EQ(ParseDuration("infs", BareNumber::kSeconds).error().message,
            "'infs' is not a duration (e.g. 5ms, 80us, 1.5s, 0)");
}

}  // namespace
}  // namespace vstack
