// The extended cost model predicts the iteration the simulator runs: compute and communication
// overlap, and only what the compute does not hide counts.
#include <catch2/catch.hpp>
#include <cmath>

#include "model/scenario.hpp"
#include "scenarios.hpp"
#include "sim/simulate.hpp"

using namespace osdp;
using namespace osdp::sim;
using namespace osdp::sim::test;

namespace {

std::string scenario_path(const std::string& name) {
  return std::string(OSDP_SOURCE_DIR) + "/scenarios/" + name;
}

double relative_error(double analytic, double simulated) { return analytic / simulated - 1.0; }

}  // namespace

TEST_CASE("the extended model predicts the simulated iteration of uniform FSDP plans",
          "[sim][overlap]") {
  for (const char* name : {"default.json", "paper-titan-16g-nd-96l-1024h.json",
                           "h100-4x8-gpt-13b.json", "a100-2x8-16g-ws-2l-10240h.json"}) {
    INFO(name);
    Scenario scenario = load_scenario(scenario_path(name));
    scenario.cost.kind = CostModelKind::extended;
    const SimOptions options = read_sim_options(scenario.simulation, scenario.file);
    const Plan plan = uniform_plan(scenario, 2, OperatorChoice::whole(Mode::zdp));
    // Nothing split: the neighbours' slices are whole (finest_split 1).
    const CostModel model(*scenario.workload, scenario.cluster, scenario.training, scenario.cost);
    const double analytic = model.plan_cost(plan).iteration_time_s;
    const double simulated = simulate_plan(scenario, plan, options).iteration_time_s;
    INFO("analytic " << analytic << " s, simulated " << simulated << " s");
    CHECK(std::abs(relative_error(analytic, simulated)) <= 0.05);
  }
}

// The plan the search picks on every shipped scenario is checked against its simulation in
// plan_peak_test.cpp (iteration time within 5 %, peak within 3 %).
