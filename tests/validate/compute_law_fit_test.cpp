// The compute laws that `osdp calibrate` fits: exact on points that follow a law, and sensible
// on points that do not (no negative fixed part, FLOP-free kinds as a fixed time per call).
#include <catch2/catch.hpp>
#include <cmath>
#include <tuple>

#include "validate/alpha_beta_fit.hpp"
#include "validate/calibration.hpp"

using namespace osdp;
using namespace osdp::validate;

TEST_CASE("a compute law is recovered from its own points", "[validate][calibration]") {
  // Two calls (layers) of 3 GFLOP per sample in all, 0.4 ms fixed each, 60 GFLOP/s.
  const double fixed_s = 4e-4, rate = 6e10, flops = 3e9;
  std::vector<ComputeSample> samples;
  for (int b : {1, 2, 4, 8}) samples.push_back({2, b * flops, 2 * fixed_s + b * flops / rate});
  const ComputeLaw law = fit_compute_law(samples);
  CHECK(law.fixed_s == Approx(fixed_s).epsilon(1e-9));
  REQUIRE(law.flops_per_s);
  CHECK(*law.flops_per_s == Approx(rate).epsilon(1e-9));
}

TEST_CASE("a compute law never has a negative fixed part", "[validate][calibration]") {
  // Faster than proportional at small batches (noise): the fit goes through the origin.
  const std::vector<std::pair<double, double>> points{{1, 0.5e-3}, {2, 2.0e-3}, {4, 4.4e-3}};
  std::vector<ComputeSample> samples;
  for (const auto& [b, t] : points) samples.push_back({1, b * 1e8, t});
  const ComputeLaw law = fit_compute_law(samples);
  CHECK(law.fixed_s == 0);
  REQUIRE(law.flops_per_s);
  // Least squares on the relative error through the origin: minimise sum (b s / t - 1)^2, so
  // s = sum(b / t) / sum((b / t)^2).
  double sum = 0, sum_squares = 0;
  for (const auto& [b, t] : points) {
    sum += b / t;
    sum_squares += (b / t) * (b / t);
  }
  CHECK(*law.flops_per_s == Approx(1e8 / (sum / sum_squares)));
}

TEST_CASE("one law from probes of several shapes: exact on points that follow it",
          "[validate][calibration]") {
  // Three probes (2, 4 and 6 calls; FLOPs per sample of widths 160, 320, 448), four batch
  // sizes each: 0.3 ms a call, 80 GFLOP/s.
  const double fixed_s = 3e-4, rate = 8e10;
  std::vector<ComputeSample> samples;
  for (const auto& [calls, flops_per_sample] :
       {std::pair{2, 0.4e9}, std::pair{4, 3.1e9}, std::pair{6, 9.0e9}}) {
    for (int b : {1, 2, 4, 8}) {
      const double flops = b * flops_per_sample;
      samples.push_back({calls, flops, calls * fixed_s + flops / rate});
    }
  }
  const ComputeLaw law = fit_compute_law(samples);
  CHECK(law.fixed_s == Approx(fixed_s).epsilon(1e-9));
  REQUIRE(law.flops_per_s);
  CHECK(*law.flops_per_s == Approx(rate).epsilon(1e-9));
  // One probe alone cannot tell a fixed part per call from one per probe; several calls counts
  // do, and a law fitted on them predicts a fourth shape it never saw.
  const double unseen_flops = 5 * 2.2e9;
  CHECK(8 * law.fixed_s + unseen_flops / *law.flops_per_s ==
        Approx(8 * fixed_s + unseen_flops / rate).epsilon(1e-9));
}

TEST_CASE("the memory-bound term is fitted where shapes tell it from the FLOPs",
          "[validate][calibration]") {
  // 0.2 ms a call, 90 GFLOP/s, 6 GB/s of saved activations; three shapes whose activation
  // bytes per FLOP differ (a longer sequence saves more scores per FLOP).
  const double fixed_s = 2e-4, rate = 9e10, bytes_per_s = 6e9;
  std::vector<ComputeSample> samples;
  for (const auto& [calls, flops_per_sample, bytes_per_sample] :
       {std::tuple{2, 0.4e9, 9e6}, std::tuple{2, 1.6e9, 8e6}, std::tuple{2, 3.6e9, 4e6}}) {
    for (int b : {1, 2, 4, 8}) {
      const double flops = b * flops_per_sample, bytes = b * bytes_per_sample;
      samples.push_back(
          {calls, flops, calls * fixed_s + flops / rate + bytes / bytes_per_s, bytes});
    }
  }
  const ComputeLaw law = fit_compute_law(samples);
  CHECK(law.fixed_s == Approx(fixed_s).epsilon(1e-6));
  REQUIRE(law.flops_per_s);
  CHECK(*law.flops_per_s == Approx(rate).epsilon(1e-6));
  REQUIRE(law.activation_bytes_per_s);
  CHECK(*law.activation_bytes_per_s == Approx(bytes_per_s).epsilon(1e-6));
  // One shape: bytes and FLOPs grow together with the batch, and the term is left out.
  const std::vector<ComputeSample> one_shape(samples.begin(), samples.begin() + 4);
  CHECK_FALSE(fit_compute_law(one_shape).activation_bytes_per_s);
}

TEST_CASE("noise on the largest probe does not swamp the smallest: relative residuals",
          "[validate][calibration]") {
  // The small probe's points follow the law; the large probe's run 10 % slow. Least squares on
  // seconds bends the law to the large points and leaves the small ones 8-9 % off (worked out
  // by hand); on the relative error every point stays within 5 %.
  const double fixed_s = 1e-3, rate = 5e10;
  std::vector<ComputeSample> samples;
  for (int b : {1, 2, 4, 8}) {
    samples.push_back({1, b * 1e7, fixed_s + b * 1e7 / rate});
    samples.push_back({4, b * 4e9, 1.1 * (4 * fixed_s + b * 4e9 / rate)});
  }
  const ComputeLaw law = fit_compute_law(samples);
  REQUIRE(law.flops_per_s);
  for (const ComputeSample& sample : samples) {
    const double predicted = compute_law_s(law, sample);
    CHECK(std::abs(predicted - sample.seconds) / sample.seconds < 0.05);
  }
}

TEST_CASE("FLOP-free calls get their mean time per call", "[validate][calibration]") {
  const std::vector<ComputeSample> samples{{1, 0.0, 2e-3}, {1, 0.0, 2.2e-3}, {1, 0.0, 2.4e-3}};
  const ComputeLaw law = fit_compute_law(samples);
  CHECK(law.fixed_s == Approx(2.2e-3));
  CHECK_FALSE(law.flops_per_s);
  CHECK(fit_compute_law(std::vector<ComputeSample>{}).fixed_s == 0);
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

TEST_CASE("the slice cost comes from paired rounds, so a drifting machine does not skew it",
          "[validate][calibration]") {
  // 6 extra slice calls of 0.2 ms each; the machine runs 1.0x, 1.3x and 0.9x as slow in three
  // rounds, and each round times the whole and the sliced operators back to back.
  const double extra_calls = 6, per_call_s = 2e-4, whole_s = 0.05;
  std::vector<PairedTimes> rounds;
  for (double slowdown : {1.0, 1.3, 0.9}) {
    rounds.push_back({slowdown * whole_s, slowdown * (whole_s + extra_calls * per_call_s)});
  }
  // The median round is the one at 1.0x: exactly the cost per call.
  CHECK(extra_per_call_s(rounds, extra_calls) == Approx(per_call_s).epsilon(1e-9));
  // The sliced time alone against the whole time of another round (as timed minutes apart) is
  // off by the drift: (1.3 x 51.2 ms - 50 ms) / 6 = 2.8 ms a call, fourteen times the cost.
  CHECK((rounds[1].with_s - rounds[0].without_s) / extra_calls > 10 * per_call_s);

  // One round whose sliced run came out faster (noise) does not move the median below zero.
  CHECK(extra_per_call_s({{0.05, 0.049}, {0.05, 0.0506}, {0.05, 0.0512}}, extra_calls) ==
        Approx(1e-4).epsilon(1e-9));
  CHECK(extra_per_call_s({{0.05, 0.049}}, extra_calls) == 0.0);
  CHECK(extra_per_call_s({}, extra_calls) == 0.0);
}
