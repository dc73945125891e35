// validate/calibration_report: the report the forked ranks hand to the parent process carries
// every figure of the calibration there and back.
#include "validate/calibration_report.hpp"

#include <catch2/catch.hpp>

namespace osdp::validate {
namespace {

CollectivePoint point(CollectiveKind kind, double scale) {
  CollectivePoint p;
  p.kind = kind;
  p.bytes = 1e6 * scale;
  p.time_s = 1e-3 * scale;
  p.time_q1_s = 0.9e-3 * scale;
  p.time_q3_s = 1.2e-3 * scale;
  p.step_bytes = 5e5 * scale;
  p.step_time_s = 0.5e-3 * scale;
  p.bus_bandwidth_Bps = 1e9 / scale;
  p.back_to_back_time_s = 0.7e-3 * scale;
  p.cpu_fraction = 0.3 * scale;
  p.last_arrival_time_s = 0.4e-3 * scale;
  p.arrival_spread_s = 0.8e-3 * scale;
  return p;
}

// Every figure set to a value of its own, none of them a default.
CalibrationResult every_figure_set() {
  CalibrationResult result;
  result.ranks = 4;
  result.collectives = {point(CollectiveKind::all_gather, 1),
                        point(CollectiveKind::reduce_scatter, 2),
                        point(CollectiveKind::all_reduce, 3)};
  result.pair_collectives = {point(CollectiveKind::all_reduce, 5)};
  result.operators = {{"attention", 4, 0.011, 0.022, 3.3e9, 4.4e8, 8.8e8, 2, 3, 0.05,
                       "2 x 320, s 128, v 2048", 1.5e6}};
  result.slicing = {{"mlp", 4, 2, 1.1e-4, 2.2e-4}};
  result.compute_flops_per_s = 4.2e10;
  result.memory_bandwidth_Bps = 9e9;
  result.optimizer_bandwidth_Bps = 3e9;
  result.kernel_launch_s = 7e-6;
  result.overlap_slowdown = 1.3;
  result.straggler_slowdown = 1.21;
  result.compute_straggler_slowdown = 1.17;
  result.compute_straggling_runs = {1.1, 1.2, 1.3};
  result.step_straggling = 1.11;
  result.step_straggling_runs = {1.05, 1.15};
  result.collective_contention = {{0, 65536}, {1.4, 1.2}, 1.3};
  result.in_training_runs = {{1.2, 1.3, 1.4}, {1.5, 1.6, 1.7}};
  result.blocking_sync = {2, 4, 8, 0.02, 0.01, 6, 1.5e-3, {0.019, 0.021}};
  return result;
}

void check_same(const CollectivePoint& a, const CollectivePoint& b) {
  CHECK(a.kind == b.kind);
  CHECK(a.bytes == b.bytes);
  CHECK(a.time_s == b.time_s);
  CHECK(a.time_q1_s == b.time_q1_s);
  CHECK(a.time_q3_s == b.time_q3_s);
  CHECK(a.step_bytes == b.step_bytes);
  CHECK(a.step_time_s == b.step_time_s);
  CHECK(a.bus_bandwidth_Bps == b.bus_bandwidth_Bps);
  CHECK(a.back_to_back_time_s == b.back_to_back_time_s);
  CHECK(a.cpu_fraction == b.cpu_fraction);
  CHECK(a.last_arrival_time_s == b.last_arrival_time_s);
  CHECK(a.arrival_spread_s == b.arrival_spread_s);
}

}  // namespace

TEST_CASE("calibration report: every figure survives the trip through JSON", "[calibration]") {
  const CalibrationResult sent = every_figure_set();
  // Through text, as the ranks' file carries it.
  const CalibrationResult got =
      calibration_result_from_report(Json::parse(calibration_report_json(sent).dump()));
  CHECK(got.ranks == sent.ranks);
  REQUIRE(got.collectives.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) check_same(got.collectives[i], sent.collectives[i]);
  REQUIRE(got.pair_collectives.size() == 1);
  check_same(got.pair_collectives[0], sent.pair_collectives[0]);
  REQUIRE(got.operators.size() == 1);
  const OperatorPoint& o = got.operators[0];
  const OperatorPoint& s = sent.operators[0];
  CHECK(o.kind == s.kind);
  CHECK(o.batch_size == s.batch_size);
  CHECK(o.forward_s == s.forward_s);
  CHECK(o.backward_s == s.backward_s);
  CHECK(o.flops == s.flops);
  CHECK(o.forward_flops_per_sample == s.forward_flops_per_sample);
  CHECK(o.backward_flops_per_sample == s.backward_flops_per_sample);
  CHECK(o.calls == s.calls);
  CHECK(o.rounds == s.rounds);
  CHECK(o.round_spread == s.round_spread);
  CHECK(o.probe == s.probe);
  CHECK(o.activation_bytes_per_sample == s.activation_bytes_per_sample);
  REQUIRE(got.slicing.size() == 1);
  CHECK(got.slicing[0].kind == "mlp");
  CHECK(got.slicing[0].slices == 4);
  CHECK(got.slicing[0].batch_size == 2);
  CHECK(got.slicing[0].forward_s == sent.slicing[0].forward_s);
  CHECK(got.slicing[0].backward_s == sent.slicing[0].backward_s);
  CHECK(got.compute_flops_per_s == sent.compute_flops_per_s);
  CHECK(got.memory_bandwidth_Bps == sent.memory_bandwidth_Bps);
  CHECK(got.optimizer_bandwidth_Bps == sent.optimizer_bandwidth_Bps);
  CHECK(got.kernel_launch_s == sent.kernel_launch_s);
  CHECK(got.overlap_slowdown == sent.overlap_slowdown);
  CHECK(got.straggler_slowdown == sent.straggler_slowdown);
  CHECK(got.compute_straggler_slowdown == sent.compute_straggler_slowdown);
  CHECK(got.compute_straggling_runs == sent.compute_straggling_runs);
  CHECK(got.step_straggling == sent.step_straggling);
  CHECK(got.step_straggling_runs == sent.step_straggling_runs);
  CHECK(got.collective_contention.overall == sent.collective_contention.overall);
  CHECK(got.collective_contention.min_step_bytes == sent.collective_contention.min_step_bytes);
  CHECK(got.collective_contention.factors == sent.collective_contention.factors);
  REQUIRE(got.in_training_runs.size() == 2);
  CHECK(got.in_training_runs[1].collective_contention == 1.5);
  CHECK(got.in_training_runs[1].overlap_slowdown == 1.6);
  CHECK(got.in_training_runs[1].straggler_slowdown == 1.7);
  const BlockingSyncFigures& b = got.blocking_sync;
  CHECK(b.tensor_degree == 2);
  CHECK(b.batch_size == 4);
  CHECK(b.steps == 8);
  CHECK(b.measured_wait_s == 0.02);
  CHECK(b.model_wait_s == 0.01);
  CHECK(b.model_syncs == 6);
  CHECK(b.per_sync_s == 1.5e-3);
  CHECK(b.step_wait_s == sent.blocking_sync.step_wait_s);
}

TEST_CASE("calibration report: a report without a figure it needs is refused", "[calibration]") {
  Json report = calibration_report_json(every_figure_set());
  report.erase("step_straggling");
  CHECK_THROWS(calibration_result_from_report(report));
}

}  // namespace osdp::validate
