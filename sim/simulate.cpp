// simulate_plan: builds the program and the network in the caller's process (bad input fails
// there), runs SimGrid in a child process, and reads the result back as JSON.
#include "sim/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "model/atomic_file.hpp"
#include "model/units.hpp"
#include "sim/child_process.hpp"
#include "sim/executor.hpp"
#include "sim/kernel.hpp"
#include "sim/program.hpp"
#include "sim/trace.hpp"

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

namespace {

std::string describe_peak_event(const MemoryEvent& event, const Program& program,
                                const Workload& workload) {
  std::string text(memory_category_name(event.category));
  std::replace(text.begin(), text.end(), '_', ' ');
  if (event.op >= 0) text += " of " + workload.op(event.op).name;
  if (event.item >= 0) {
    const ProgramItem& item = program.items[event.item];
    text += item.collective ? fmt::format(" ({} {})", collective_name(item.kind),
                                          comm_category_name(item.category))
                            : fmt::format(" ({})", phase_name(item.phase));
  }
  return text;
}

SimulationResult collect(const Executor& executor, const Program& program, const Plan& plan,
                         const Workload& workload, const Kernel& kernel,
                         const SimOptions& options) {
  SimulationResult result;
  result.ranks = executor.ranks();
  result.batch_size = plan.batch_size;
  result.granularity = options.granularity;
  const auto& finish = executor.finish_s();
  result.iteration_time_s = *std::max_element(finish.begin(), finish.end());
  result.throughput_samples_per_s =
      result.iteration_time_s > 0 ? result.ranks * plan.batch_size / result.iteration_time_s : 0;
  result.compute_s = executor.compute_s()[0];
  result.optimizer_step_s = executor.optimizer_step_s(0);
  result.exposed_comm_s = executor.exposed_comm_s()[0];
  for (int r = 0; r < result.ranks; ++r) {
    const MemoryTimeline& memory = executor.memory()[r];
    result.peak_memory_bytes_per_rank.push_back(memory.peak_bytes());
    if (r == 0 || memory.peak_bytes() > result.peak_memory_bytes) {
      result.peak_memory_bytes = memory.peak_bytes();
      result.peak_rank = r;
      result.peak_time_s = memory.peak_time_s();
      result.peak_memory_cause = describe_peak_event(memory.peak_event(), program, workload);
      result.peak_breakdown_bytes = memory.peak_breakdown();
    }
  }
  result.compute_tasks = executor.compute_tasks();
  result.collectives = executor.collectives();
  result.flows = kernel.flows();
  result.timers = kernel.timers();
  return result;
}

}  // namespace

namespace {

// What the parent prepares for one plan; the child only runs it.
struct Prepared {
  Program program;
  NetworkPlan network;
};

Prepared prepare(const Scenario& scenario, const Plan& plan, const SimOptions& options) {
  const CostModel model = scenario.cost_model();
  Program program = build_program(model, plan, options);
  NetworkPlan network = plan_network(scenario.cluster, program_groups(scenario.cluster, program));
  return {std::move(program), std::move(network)};
}

std::string run_prepared(const Scenario& scenario, const Plan& plan, const SimOptions& options,
                         const Prepared& prepared, const std::string& trace_path) {
  Kernel kernel(prepared.network, options.network);
  Executor executor(prepared.program, scenario.cluster, prepared.network, options, kernel,
                    !trace_path.empty());
  executor.start();
  kernel.run();
  if (!executor.complete()) throw std::logic_error("sim: the iteration deadlocked");
  if (!trace_path.empty()) {
    try {
      write_file_atomically(trace_path, chrome_trace(executor, *scenario.workload));
    } catch (const std::runtime_error& error) {
      throw InputError("<command line>", "--trace", trace_path,
                       fmt::format("a path where the trace can be written ({})", error.what()));
    }
  }
  return to_json(collect(executor, prepared.program, plan, *scenario.workload, kernel, options))
      .dump();
}

}  // namespace

SimulationResult simulate_plan(const Scenario& scenario, const Plan& plan,
                               const SimOptions& requested, const std::string& trace_path) {
  SimOptions options = requested;
  options.granularity = resolve_granularity(options.granularity, scenario.cluster.ranks);
  const Prepared prepared = prepare(scenario, plan, options);
  const std::string reply =
      run_in_child([&]() { return run_prepared(scenario, plan, options, prepared, trace_path); });
  return simulation_result_from_json(Json::parse(reply));
}

std::vector<SimulationResult> simulate_plans(const Scenario& scenario,
                                             const std::vector<Plan>& plans,
                                             const SimOptions& requested, int parallelism) {
  SimOptions options = requested;
  options.granularity = resolve_granularity(options.granularity, scenario.cluster.ranks);
  std::vector<Prepared> prepared;
  for (const Plan& plan : plans) prepared.push_back(prepare(scenario, plan, options));
  std::vector<std::function<std::string()>> bodies;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    bodies.emplace_back(
        [&, i]() { return run_prepared(scenario, plans[i], options, prepared[i], ""); });
  }
  std::vector<SimulationResult> results;
  for (const std::string& reply : run_in_children(bodies, parallelism)) {
    results.push_back(simulation_result_from_json(Json::parse(reply)));
  }
  return results;
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
  const Json& events = json.at("events");
  result.compute_tasks = events.at("compute_tasks").get<std::int64_t>();
  result.collectives = events.at("collectives").get<std::int64_t>();
  result.flows = events.at("flows").get<std::int64_t>();
  result.timers = events.at("timers").get<std::int64_t>();
  return result;
}

}  // namespace osdp::sim
