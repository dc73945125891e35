// CPU offload in the simulator: each offloaded slice's copies run where the mode's offload
// description puts them (before each gather it feeds, after the reduction it drains, after the
// step), the initial memory leaves the offloaded states out, and the cost model's figures agree
// with the simulation (peak 3 %, time 5 %) as for any plan.
#include <catch2/catch.hpp>

#include "model/scenario.hpp"
#include "search/exact.hpp"
#include "search/strategies.hpp"
#include "sim/program.hpp"
#include "sim/simulate.hpp"

using namespace osdp;
using namespace osdp::sim;

namespace {

Scenario gpt_on_titans() {
  const Json document = {
      {"name", "offload"},
      {"model",
       {{"family", "gpt"},
        {"layers", 6},
        {"hidden", 1024},
        {"heads", 16},
        {"sequence_length", 256},
        {"vocabulary", 16384}}},
      {"cluster", "clusters/titan-rtx-8x-pcie3.json"},
      {"training",
       {{"precision", "fp32"},
        {"optimizer", "adam"},
        {"memory_limit", "2GiB"},
        {"max_batch_size", 16}}},
      {"cost_model", "extended"},
      {"search",
       {{"modes", {"dp", "zdp", "z2", "z1"}}, {"checkpoint", "auto"}, {"offload", "auto"}}}};
  return scenario_from_json(document, std::string(OSDP_SOURCE_DIR) + "/scenarios/offload.json");
}

int copies(const Program& program, CopyDirection direction) {
  int count = 0;
  for (const ProgramItem& item : program.items) {
    count += item.host_copy && item.copy_direction == direction;
  }
  return count;
}

Plan uniform(const Workload& workload, OperatorChoice choice) {
  Plan plan;
  plan.batch_size = 2;
  plan.choices.assign(workload.size(), choice);
  return plan;
}

}  // namespace

TEST_CASE("offload copies run where the mode's description puts them", "[sim][offload]") {
  const Scenario scenario = gpt_on_titans();
  const CostModel model = scenario.cost_model();
  const SimOptions options = read_sim_options(scenario.simulation, scenario.file);
  const int n = scenario.workload->size();
  // FSDP CPUOffload: the shard in before each gather (forward, recompute, backward), out after
  // the reduce-scatter.
  Program fsdp = build_program(
      model,
      uniform(*scenario.workload, OperatorChoice::whole(Mode::zdp, Checkpoint::unfused, true)),
      options);
  CHECK(copies(fsdp, CopyDirection::to_device) == 3 * n);
  CHECK(copies(fsdp, CopyDirection::to_host) == n);
  // ZeRO-Offload: out after the reduce-scatter, the updated shard back after the step.
  for (const Mode mode : {Mode::z2, Mode::z1}) {
    Program zero = build_program(
        model, uniform(*scenario.workload, OperatorChoice::whole(mode, Checkpoint::none, true)),
        options);
    CHECK(copies(zero, CopyDirection::to_device) == n);
    CHECK(copies(zero, CopyDirection::to_host) == n);
  }
  Program plain =
      build_program(model, uniform(*scenario.workload, OperatorChoice::whole(Mode::zdp)), options);
  CHECK(copies(plain, CopyDirection::to_device) == 0);
  // The offloaded states are not in device memory from the start.
  double offloaded_initial = 0, plain_initial = 0;
  for (const MemoryAction& action : fsdp.initial) offloaded_initial += action.bytes;
  for (const MemoryAction& action : plain.initial) plain_initial += action.bytes;
  CHECK(plain_initial - offloaded_initial ==
        Approx(scenario.workload->model_state_bytes() / scenario.cluster.ranks).epsilon(1e-9));
}

TEST_CASE("on a PCIe tree the copies are flows to each socket's memory", "[sim][offload]") {
  const Scenario scenario = gpt_on_titans();
  const CostModel model = scenario.cost_model();
  const SimOptions options = read_sim_options(scenario.simulation, scenario.file);
  const Plan plain = uniform(*scenario.workload, OperatorChoice::whole(Mode::z2));
  const Plan offloaded =
      uniform(*scenario.workload, OperatorChoice::whole(Mode::z2, Checkpoint::none, true));
  const SimulationResult without = simulate_plan(scenario, plain, options);
  const SimulationResult with = simulate_plan(scenario, offloaded, options);
  // ZeRO-Offload: two copies a slice (out and back) on every rank, each one flow.
  const std::int64_t copies = 2LL * scenario.workload->size() * scenario.cluster.ranks;
  CHECK(with.flows - without.flows == copies);
  // Alone on its path (every GPU of the node copying at once) a copy takes what the cost model
  // charges it: the simulated iteration grows by the copies and the CPU's step.
  const PlanCost analytic_plain = model.plan_cost(plain);
  const PlanCost analytic_offloaded = model.plan_cost(offloaded);
  CHECK(
      with.iteration_time_s - without.iteration_time_s ==
      Approx(analytic_offloaded.iteration_time_s - analytic_plain.iteration_time_s).epsilon(0.05));
}

TEST_CASE("offloaded plans: analytic figures agree with their simulation", "[sim][offload]") {
  const Scenario scenario = gpt_on_titans();
  const CostModel model = scenario.cost_model();
  const SimOptions options = read_sim_options(scenario.simulation, scenario.file);
  std::vector<std::pair<std::string, ScheduledPlan>> plans;
  for (const std::string name : {"fsdp_offload", "zero2_offload"}) {
    const StrategyResult result = schedule_strategy(model, *strategy_from_name(name));
    REQUIRE(result.best);
    plans.emplace_back(name, *result.best);
  }
  Plan z1 = uniform(*scenario.workload, OperatorChoice::whole(Mode::z1, Checkpoint::none, true));
  plans.emplace_back("z1 offloaded", ScheduledPlan{z1, model.plan_cost(z1)});
  const SearchResult searched = search(model, scenario.search);
  REQUIRE(searched.best);
  plans.emplace_back("osdp --offload auto", *searched.best);
  for (const auto& [name, plan] : plans) {
    const SimulationResult simulated = simulate_plan(scenario, plan.plan, options);
    INFO(name << ": analytic " << plan.cost.iteration_time_s << " s, "
              << plan.cost.peak_memory_bytes << " B; simulated " << simulated.iteration_time_s
              << " s, " << simulated.peak_memory_bytes << " B");
    CHECK(std::abs(plan.cost.peak_memory_bytes / simulated.peak_memory_bytes - 1.0) <= 0.03);
    CHECK(std::abs(plan.cost.iteration_time_s / simulated.iteration_time_s - 1.0) <= 0.05);
  }
}
