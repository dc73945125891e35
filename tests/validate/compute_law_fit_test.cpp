// The compute laws that `osdp calibrate` fits: exact on points that follow a law, and sensible
// on points that do not (no negative fixed part, FLOP-free kinds as a fixed time per call).
#include <catch2/catch.hpp>

#include "validate/alpha_beta_fit.hpp"

using namespace osdp;
using namespace osdp::validate;

TEST_CASE("a compute law is recovered from its own points", "[validate][calibration]") {
  // Two calls (layers) of 3 GFLOP per sample in all, 0.4 ms fixed each, 60 GFLOP/s.
  const double fixed_s = 4e-4, rate = 6e10, flops = 3e9;
  std::vector<std::pair<double, double>> points;
  for (int b : {1, 2, 4, 8}) points.emplace_back(b, 2 * fixed_s + b * flops / rate);
  const ComputeLaw law = fit_compute_law(points, flops, 2);
  CHECK(law.fixed_s == Approx(fixed_s).epsilon(1e-9));
  REQUIRE(law.flops_per_s);
  CHECK(*law.flops_per_s == Approx(rate).epsilon(1e-9));
}

TEST_CASE("a compute law never has a negative fixed part", "[validate][calibration]") {
  // Faster than proportional at small batches (noise): the fit goes through the origin.
  const std::vector<std::pair<double, double>> points{{1, 0.5e-3}, {2, 2.0e-3}, {4, 4.4e-3}};
  const ComputeLaw law = fit_compute_law(points, 1e8, 1);
  CHECK(law.fixed_s == 0);
  REQUIRE(law.flops_per_s);
  // Least squares through the origin: slope = sum(b t) / sum(b^2).
  const double slope = (0.5e-3 + 4.0e-3 + 17.6e-3) / 21.0;
  CHECK(*law.flops_per_s == Approx(1e8 / slope));
}

TEST_CASE("FLOP-free calls get their mean time per call", "[validate][calibration]") {
  const std::vector<std::pair<double, double>> points{{1, 2e-3}, {2, 2.2e-3}, {4, 2.4e-3}};
  const ComputeLaw law = fit_compute_law(points, 0.0, 1);
  CHECK(law.fixed_s == Approx(2.2e-3));
  CHECK_FALSE(law.flops_per_s);
  CHECK(fit_compute_law({}, 1e9, 1).fixed_s == 0);
}

TEST_CASE("one alpha-beta line: exact on its own points, one noisy size moves it little",
          "[validate][calibration]") {
  const double alpha_s = 3e-4, beta = 1.0 / 1e9;
  std::vector<std::pair<double, double>> points;
  for (double bytes : {8e3, 32e3, 128e3, 512e3, 2e6, 8e6}) {
    points.emplace_back(bytes, alpha_s + bytes * beta);
  }
  const AlphaBeta exact = fit_alpha_beta(points);
  CHECK(exact.alpha_s == Approx(alpha_s).epsilon(1e-9));
  CHECK(exact.beta_s_per_byte == Approx(beta).epsilon(1e-9));

  // One size measured 4x slow (a spell of late wake-ups): the piecewise fit makes it the law
  // of its neighbourhood; the single line, fitted on relative error, keeps every size within
  // a third of the truth.
  points[2].second *= 4;
  const AlphaBeta line = fit_alpha_beta(points);
  for (const auto& [bytes, time] : points) {
    const double truth = alpha_s + bytes * beta;
    CHECK(std::abs(line.alpha_s + bytes * line.beta_s_per_byte - truth) / truth < 0.35);
  }
  const CollectiveTiming piecewise = fit_collective_timing(points);
  const AlphaBeta at_noisy = piecewise.at(128e3);
  CHECK(at_noisy.alpha_s + 128e3 * at_noisy.beta_s_per_byte ==
        Approx(4 * (alpha_s + 128e3 * beta)));

  CHECK(fit_alpha_beta({}).alpha_s == 0.0);
  CHECK(fit_alpha_beta({{1e6, 2e-3}}).alpha_s >= 0.0);
}
