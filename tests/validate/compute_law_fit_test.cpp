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
