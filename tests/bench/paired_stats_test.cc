// The statistics of `vstack bench` on synthetic samples, where the truth is known: a real
// difference is found (and its interval covers it), no difference gives no finding in about 95%
// of comparisons (matrix_test.cc has the A/A pair in a matrix summary). Every check counts
// outcomes over seeded trials; nothing is timed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "bench/workload/paired_stats.h"

namespace vstack::bench {
namespace {

// Paired per-round ratios of a stack whose true ratio to the baseline is `truth`: each round
// drifts for both sides alike (the machine), and each side has its own noise of `sd` (log).
std::vector<double> Rounds(std::mt19937_64& rng, int n, double truth, double sd) {
  std::normal_distribution<double> drift(0, 0.3), noise(0, sd);
  std::vector<double> ratios;
  for (int r = 0; r < n; ++r) {
    const double machine = std::exp(drift(rng));
    const double base = 1000 * machine * std::exp(noise(rng));
    const double x = 1000 * truth * machine * std::exp(noise(rng));
    ratios.push_back(x / base);
  }
  return ratios;
}

TEST(PairedStats, StudentQuantilesMatchTheTables) {
  EXPECT_NEAR(StudentT975(1), 12.706, 1e-3);
  EXPECT_NEAR(StudentT975(4), 2.776, 1e-3);
  EXPECT_NEAR(StudentT975(30), 2.042, 1e-3);
  EXPECT_NEAR(StudentT975(40), 2.021, 2e-3);   // the expansion past the table
  EXPECT_NEAR(StudentT975(120), 1.980, 2e-3);
  EXPECT_NEAR(StudentT975(100000), 1.960, 1e-3);
}

TEST(PairedStats, KnownIntervalOfFixedRatios) {
  // log ratios ln(0.9), ln(1.0), ln(1.1): mean -0.00117, sd 0.10034, n 3.
  const RatioInterval r = PairedRatio({0.9, 1.0, 1.1});
  EXPECT_EQ(r.n, 3);
  EXPECT_NEAR(r.estimate, std::cbrt(0.9 * 1.0 * 1.1), 1e-12);
  const double se = 0.100343 / std::sqrt(3.0);
  EXPECT_NEAR(r.low, std::exp(std::log(r.estimate) - 4.303 * se), 3e-4);
  EXPECT_NEAR(r.high, std::exp(std::log(r.estimate) + 4.303 * se), 3e-4);
  EXPECT_FALSE(r.significant);
  EXPECT_EQ(DescribeRatio(r).find("not significant") != std::string::npos, true) << DescribeRatio(r);
  // A constant ratio has a zero-width interval: significant unless it is exactly 1.
  EXPECT_TRUE(PairedRatio({0.9, 0.9, 0.9}).significant);
  EXPECT_FALSE(PairedRatio({1.0, 1.0}).significant);
  // One round: an estimate, no interval, never a finding. Unusable rounds are left out.
  const RatioInterval one = PairedRatio({0.5, 0.0, NAN});
  EXPECT_EQ(one.n, 1);
  EXPECT_FALSE(one.has_interval());
  EXPECT_FALSE(one.significant);
  EXPECT_TRUE(std::isinf(one.relative_half_width()));
  EXPECT_EQ(RoundRatios({10, 0, 30}, {5, 5, 0}), std::vector<double>{2.0});
}

TEST(PairedStats, AKnownDifferenceIsFoundAndCovered) {
  std::mt19937_64 rng(7);
  int found = 0, covered = 0;
  const int trials = 400;
  for (int t = 0; t < trials; ++t) {
    const RatioInterval r = PairedRatio(Rounds(rng, 5, 0.9, 0.02));
    found += r.significant && r.high < 1;
    covered += r.low <= 0.9 && 0.9 <= r.high;
  }
  // A 10% loss under 2% noise per side is found every time; the 95% interval covers the truth
  // in about 95% of trials (binomial sd 1.1% at 400 trials).
  EXPECT_EQ(found, trials);
  EXPECT_GE(covered, trials * 91 / 100);
}

TEST(PairedStats, NoDifferenceGivesNoFindingInAbout95PercentOfComparisons) {
  std::mt19937_64 rng(11);
  int findings = 0;
  const int trials = 2000;
  for (int t = 0; t < trials; ++t) findings += PairedRatio(Rounds(rng, 5, 1.0, 0.05)).significant;
  // The false-finding rate of a 95% interval is 5% (binomial sd 0.5% at 2000 trials). The
  // machine's drift (30% between rounds) does not inflate it: pairing cancels it.
  EXPECT_GE(findings, trials * 3 / 100);
  EXPECT_LE(findings, trials * 7 / 100);
}

}  // namespace
}  // namespace vstack::bench
