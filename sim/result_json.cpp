// The simulator's results as JSON (with units in every key), and back: simulations run in a
// child process and hand their result to the caller as this JSON.
#include <algorithm>

#include "sim/simulate.hpp"

namespace osdp::sim {

std::string_view comm_category_name(CommCategory category) {
  switch (category) {
    case CommCategory::ag_forward:
      return "ag_forward";
    case CommCategory::ag_backward:
      return "ag_backward";
    case CommCategory::ag_recompute:
      return "ag_recompute";
    case CommCategory::reduce_scatter:
      return "reduce_scatter";
    case CommCategory::all_reduce:
      return "all_reduce";
    case CommCategory::ag_after_step:
      return "ag_after_step";
  }
  return "?";
}

std::string_view memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::model_states:
      return "model_states";
    case MemoryCategory::extra:
      return "extra";
    case MemoryCategory::activations:
      return "activations";
    case MemoryCategory::recomputed_activations:
      return "recomputed_activations";
    case MemoryCategory::gathered_parameters:
      return "gathered_parameters";
    case MemoryCategory::unsharded_gradients:
      return "unsharded_gradients";
    case MemoryCategory::workspace:
      return "workspace";
  }
  return "?";
}

double SimulationResult::exposed_comm_total_s() const {
  double total = 0;
  for (double s : exposed_comm_s) total += s;
  return total;
}

double SimulationResult::critical_rank_exposed_comm_s() const {
  if (exposed_comm_total_s_per_rank.empty()) return exposed_comm_total_s();
  return *std::min_element(exposed_comm_total_s_per_rank.begin(),
                           exposed_comm_total_s_per_rank.end());
}

Json to_json(const SimulationResult& result) {
  Json exposed = Json::object();
  Json breakdown = Json::object();
  for (int c = 0; c < comm_categories; ++c) {
    exposed[std::string(comm_category_name(static_cast<CommCategory>(c)))] =
        result.exposed_comm_s[c];
  }
  for (int c = 0; c < memory_categories; ++c) {
    breakdown[std::string(memory_category_name(static_cast<MemoryCategory>(c))) + "_bytes"] =
        result.peak_breakdown_bytes[c];
  }
  return {{"ranks", result.ranks},
          {"batch_size", result.batch_size},
          {"collectives_mode", std::string(granularity_name(result.granularity))},
          {"iteration_time_s", result.iteration_time_s},
          {"throughput_samples_per_s", result.throughput_samples_per_s},
          {"compute_s", result.compute_s},
          {"optimizer_step_s", result.optimizer_step_s},
          {"exposed_comm_s", exposed},
          {"exposed_comm_total_s", result.exposed_comm_total_s()},
          {"peak_memory_bytes", result.peak_memory_bytes},
          {"peak_memory_rank", result.peak_rank},
          {"peak_memory_time_s", result.peak_time_s},
          {"peak_memory_cause", result.peak_memory_cause},
          {"peak_memory_breakdown", breakdown},
          {"peak_memory_bytes_per_rank", result.peak_memory_bytes_per_rank},
          {"exposed_comm_total_s_per_rank", result.exposed_comm_total_s_per_rank},
          {"events",
           {{"compute_tasks", result.compute_tasks},
            {"collectives", result.collectives},
            {"flows", result.flows},
            {"timers", result.timers}}}};
}

SimulationResult simulation_result_from_json(const Json& json) {
  SimulationResult result;
  result.ranks = json.at("ranks").get<int>();
  result.batch_size = json.at("batch_size").get<int>();
  result.granularity = json.at("collectives_mode").get<std::string>() == "step"
                           ? Granularity::step
                           : Granularity::scale;
  result.iteration_time_s = json.at("iteration_time_s").get<double>();
  result.throughput_samples_per_s = json.at("throughput_samples_per_s").get<double>();
  result.compute_s = json.at("compute_s").get<double>();
  result.optimizer_step_s = json.at("optimizer_step_s").get<double>();
  for (int c = 0; c < comm_categories; ++c) {
    result.exposed_comm_s[c] =
        json.at("exposed_comm_s")
            .at(std::string(comm_category_name(static_cast<CommCategory>(c))))
            .get<double>();
  }
  for (int c = 0; c < memory_categories; ++c) {
    result.peak_breakdown_bytes[c] =
        json.at("peak_memory_breakdown")
            .at(std::string(memory_category_name(static_cast<MemoryCategory>(c))) + "_bytes")
            .get<double>();
  }
  result.peak_memory_bytes = json.at("peak_memory_bytes").get<double>();
  result.peak_rank = json.at("peak_memory_rank").get<int>();
  result.peak_time_s = json.at("peak_memory_time_s").get<double>();
  result.peak_memory_cause = json.at("peak_memory_cause").get<std::string>();
  result.peak_memory_bytes_per_rank =
      json.at("peak_memory_bytes_per_rank").get<std::vector<double>>();
  result.exposed_comm_total_s_per_rank =
      json.at("exposed_comm_total_s_per_rank").get<std::vector<double>>();
  const Json& events = json.at("events");
  result.compute_tasks = events.at("compute_tasks").get<std::int64_t>();
  result.collectives = events.at("collectives").get<std::int64_t>();
  result.flows = events.at("flows").get<std::int64_t>();
  result.timers = events.at("timers").get<std::int64_t>();
  return result;
}

}  // namespace osdp::sim
