// simulate_plan: builds the program and the network in the caller's process (bad input fails
// there), runs SimGrid in a child process, and reads the result back as JSON.
#include "sim/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "model/atomic_file.hpp"
#include "model/units.hpp"
#include "sim/child_process.hpp"
#include "sim/executor.hpp"
#include "sim/kernel.hpp"
#include "sim/program.hpp"
#include "sim/trace.hpp"

namespace osdp::sim {

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
      result.iteration_time_s > 0
          ? result.ranks * plan.batch_size * program.accumulation_steps / result.iteration_time_s
          : 0;
  result.compute_s = executor.compute_s()[0];
  result.optimizer_step_s = executor.optimizer_step_s(0);
  result.exposed_comm_s = executor.exposed_comm_s()[0];
  for (int r = 0; r < result.ranks; ++r) {
    const MemoryTimeline& memory = executor.memory()[r];
    result.peak_memory_bytes_per_rank.push_back(memory.peak_bytes());
    const auto& exposed = executor.exposed_comm_s()[r];
    result.exposed_comm_total_s_per_rank.push_back(
        std::accumulate(exposed.begin(), exposed.end(), 0.0));
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
  // The plan's own accumulation steps (a global batch reached at its micro-batch).
  const Scenario planned = scenario.for_plan(plan);
  const CostModel model = planned.cost_model();
  Program program = build_program(model, plan, options);
  NetworkPlan network = plan_network(scenario.cluster, program_groups(scenario.cluster, program));
  return {std::move(program), std::move(network)};
}

std::string run_prepared(const Scenario& scenario, const Plan& plan, const SimOptions& options,
                         const Prepared& prepared, const std::string& trace_path, int trace_ranks) {
  const bool ring_routes = options.granularity != Granularity::scale ||
                           !collectives_run_alone(scenario.cluster, prepared.program);
  Kernel kernel(prepared.network, options.network, ring_routes);
  Executor executor(prepared.program, scenario.cluster, prepared.network, options, kernel,
                    trace_path.empty() ? 0 : trace_ranks);
  executor.start();
  kernel.run();
  if (!executor.complete()) throw std::logic_error("sim: the iteration deadlocked");
  if (!trace_path.empty()) {
    try {
      write_file_atomically(trace_path, chrome_trace(executor, *scenario.workload, trace_ranks));
    } catch (const std::runtime_error& error) {
      throw InputError("command line", "--trace", trace_path,
                       fmt::format("a path where the trace can be written ({})", error.what()));
    }
  }
  return to_json(collect(executor, prepared.program, plan, *scenario.workload, kernel, options))
      .dump();
}

}  // namespace

SimulationResult simulate_plan(const Scenario& scenario, const Plan& plan,
                               const SimOptions& requested, const std::string& trace_path,
                               int trace_ranks) {
  SimOptions options = requested;
  options.granularity = resolve_granularity(options.granularity, scenario.cluster.ranks);
  const Prepared prepared = prepare(scenario, plan, options);
  const std::string reply = run_in_child(
      [&]() { return run_prepared(scenario, plan, options, prepared, trace_path, trace_ranks); });
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
        [&, i]() { return run_prepared(scenario, plans[i], options, prepared[i], "", 0); });
  }
  std::vector<SimulationResult> results;
  for (const std::string& reply : run_in_children(bodies, parallelism)) {
    results.push_back(simulation_result_from_json(Json::parse(reply)));
  }
  return results;
}

}  // namespace osdp::sim
