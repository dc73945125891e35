#include "validate/calibration_report.hpp"

#include <string>
#include <utility>

namespace osdp::validate {
namespace {

Json contention_json(const ContentionBySize& contention) {
  Json segments = Json::array();
  for (std::size_t s = 0; s < contention.factors.size(); ++s) {
    segments.push_back(
        {{"min_step_bytes", contention.min_step_bytes.at(s)}, {"factor", contention.factors[s]}});
  }
  return {{"overall", contention.overall}, {"by_step_bytes", std::move(segments)}};
}

Json slicing_json(const std::vector<SlicingPoint>& points) {
  Json json = Json::array();
  for (const auto& p : points) {
    json.push_back({{"kind", p.kind},
                    {"slices", p.slices},
                    {"batch_size", p.batch_size},
                    {"extra_slice_forward_s", p.forward_s},
                    {"extra_slice_backward_s", p.backward_s}});
  }
  return json;
}

Json blocking_sync_json(const BlockingSyncFigures& figures) {
  return {{"tensor_degree", figures.tensor_degree},
          {"batch_size", figures.batch_size},
          {"steps", figures.steps},
          {"measured_wait_s", figures.measured_wait_s},
          {"model_wait_s", figures.model_wait_s},
          {"model_syncs", figures.model_syncs},
          {"per_sync_s", figures.per_sync_s},
          {"step_wait_s", figures.step_wait_s}};
}

BlockingSyncFigures blocking_sync_from_json(const Json& json) {
  BlockingSyncFigures figures;
  figures.tensor_degree = json.at("tensor_degree").get<int>();
  figures.batch_size = json.at("batch_size").get<int>();
  figures.steps = json.at("steps").get<int>();
  figures.measured_wait_s = json.at("measured_wait_s").get<double>();
  figures.model_wait_s = json.at("model_wait_s").get<double>();
  figures.model_syncs = json.at("model_syncs").get<double>();
  figures.per_sync_s = json.at("per_sync_s").get<double>();
  figures.step_wait_s = json.at("step_wait_s").get<std::vector<double>>();
  return figures;
}

Json in_training_runs_json(const std::vector<CalibrationResult::InTrainingRun>& runs) {
  Json json = Json::array();
  for (const auto& run : runs) {
    json.push_back({{"collective_contention", run.collective_contention},
                    {"overlap_slowdown", run.overlap_slowdown},
                    {"straggler_slowdown", run.straggler_slowdown}});
  }
  return json;
}

Json collective_points_json(const std::vector<CollectivePoint>& points) {
  Json collectives = Json::array();
  for (const auto& p : points) {
    collectives.push_back({{"collective", std::string(collective_name(p.kind))},
                           {"bytes", p.bytes},
                           {"time_s", p.time_s},
                           {"step_bytes", p.step_bytes},
                           {"step_time_s", p.step_time_s},
                           {"bus_bandwidth_Bps", p.bus_bandwidth_Bps},
                           {"time_q1_s", p.time_q1_s},
                           {"time_q3_s", p.time_q3_s},
                           {"back_to_back_time_s", p.back_to_back_time_s},
                           {"cpu_fraction", p.cpu_fraction},
                           {"last_arrival_time_s", p.last_arrival_time_s},
                           {"arrival_spread_s", p.arrival_spread_s}});
  }
  return collectives;
}

std::vector<CollectivePoint> collective_points_from_json(const Json& json) {
  std::vector<CollectivePoint> points;
  for (const auto& p : json) {
    CollectivePoint point;
    const std::string name = p.at("collective").get<std::string>();
    for (CollectiveKind kind :
         {CollectiveKind::all_gather, CollectiveKind::reduce_scatter, CollectiveKind::all_reduce}) {
      if (collective_name(kind) == name) point.kind = kind;
    }
    point.bytes = p.at("bytes").get<double>();
    point.time_s = p.at("time_s").get<double>();
    point.step_bytes = p.at("step_bytes").get<double>();
    point.step_time_s = p.at("step_time_s").get<double>();
    point.bus_bandwidth_Bps = p.at("bus_bandwidth_Bps").get<double>();
    point.cpu_fraction = p.value("cpu_fraction", 0.0);
    point.time_q1_s = p.value("time_q1_s", point.time_s);
    point.time_q3_s = p.value("time_q3_s", point.time_s);
    point.back_to_back_time_s = p.value("back_to_back_time_s", point.time_s);
    point.last_arrival_time_s = p.value("last_arrival_time_s", 0.0);
    point.arrival_spread_s = p.value("arrival_spread_s", 0.0);
    points.push_back(point);
  }
  return points;
}

}  // namespace

Json calibration_report_json(const CalibrationResult& result) {
  Json collectives = collective_points_json(result.collectives);
  Json operators = Json::array();
  for (const auto& p : result.operators) {
    operators.push_back({{"kind", p.kind},
                         {"probe", p.probe},
                         {"batch_size", p.batch_size},
                         {"forward_s", p.forward_s},
                         {"backward_s", p.backward_s},
                         {"flops", p.flops},
                         {"forward_flops_per_sample", p.forward_flops_per_sample},
                         {"backward_flops_per_sample", p.backward_flops_per_sample},
                         {"activation_bytes_per_sample", p.activation_bytes_per_sample},
                         {"calls", p.calls},
                         {"rounds", p.rounds},
                         {"round_spread", p.round_spread},
                         {"flops_per_s", p.flops / (p.forward_s + p.backward_s)}});
  }
  return {{"ranks", result.ranks},
          {"collectives", std::move(collectives)},
          {"pair_collectives", collective_points_json(result.pair_collectives)},
          {"operators", std::move(operators)},
          {"compute_flops_per_s", result.compute_flops_per_s},
          {"memory_bandwidth_Bps", result.memory_bandwidth_Bps},
          {"optimizer_bandwidth_Bps", result.optimizer_bandwidth_Bps},
          {"kernel_launch_s", result.kernel_launch_s},
          {"overlap_slowdown", result.overlap_slowdown},
          {"collective_contention", contention_json(result.collective_contention)},
          {"slicing", slicing_json(result.slicing)},
          {"straggler_slowdown", result.straggler_slowdown},
          {"compute_straggler_slowdown", result.compute_straggler_slowdown},
          {"compute_straggling_runs", result.compute_straggling_runs},
          {"step_straggling", result.step_straggling},
          {"step_straggling_runs", result.step_straggling_runs},
          {"in_training_runs", in_training_runs_json(result.in_training_runs)},
          {"blocking_sync", blocking_sync_json(result.blocking_sync)}};
}

CalibrationResult calibration_result_from_report(const Json& report) {
  CalibrationResult parsed;
  parsed.ranks = report.at("ranks").get<int>();
  parsed.collectives = collective_points_from_json(report.at("collectives"));
  if (report.contains("pair_collectives")) {
    parsed.pair_collectives = collective_points_from_json(report.at("pair_collectives"));
  }
  for (const auto& p : report.at("operators")) {
    parsed.operators.push_back(
        {p.at("kind").get<std::string>(), p.at("batch_size").get<int>(),
         p.at("forward_s").get<double>(), p.at("backward_s").get<double>(),
         p.at("flops").get<double>(), p.at("forward_flops_per_sample").get<double>(),
         p.at("backward_flops_per_sample").get<double>(), p.at("calls").get<int>(),
         p.value("rounds", 1), p.value("round_spread", 0.0), p.value("probe", ""),
         p.value("activation_bytes_per_sample", 0.0)});
  }
  parsed.compute_flops_per_s = report.at("compute_flops_per_s").get<double>();
  parsed.memory_bandwidth_Bps = report.at("memory_bandwidth_Bps").get<double>();
  parsed.optimizer_bandwidth_Bps = report.at("optimizer_bandwidth_Bps").get<double>();
  parsed.kernel_launch_s = report.at("kernel_launch_s").get<double>();
  parsed.overlap_slowdown = report.at("overlap_slowdown").get<double>();
  for (const auto& p : report.at("slicing")) {
    parsed.slicing.push_back({p.at("kind").get<std::string>(), p.at("slices").get<int>(),
                              p.at("batch_size").get<int>(),
                              p.at("extra_slice_forward_s").get<double>(),
                              p.at("extra_slice_backward_s").get<double>()});
  }
  parsed.straggler_slowdown = report.at("straggler_slowdown").get<double>();
  parsed.compute_straggler_slowdown = report.at("compute_straggler_slowdown").get<double>();
  parsed.compute_straggling_runs = report.at("compute_straggling_runs").get<std::vector<double>>();
  parsed.step_straggling = report.at("step_straggling").get<double>();
  parsed.step_straggling_runs = report.at("step_straggling_runs").get<std::vector<double>>();
  for (const auto& run : report.at("in_training_runs")) {
    parsed.in_training_runs.push_back({run.at("collective_contention").get<double>(),
                                       run.at("overlap_slowdown").get<double>(),
                                       run.at("straggler_slowdown").get<double>()});
  }
  const Json& contention = report.at("collective_contention");
  parsed.collective_contention.overall = contention.at("overall").get<double>();
  for (const auto& segment : contention.at("by_step_bytes")) {
    parsed.collective_contention.min_step_bytes.push_back(
        segment.at("min_step_bytes").get<double>());
    parsed.collective_contention.factors.push_back(segment.at("factor").get<double>());
  }
  parsed.blocking_sync = blocking_sync_from_json(report.at("blocking_sync"));
  return parsed;
}

}  // namespace osdp::validate
