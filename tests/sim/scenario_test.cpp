#include "model/scenario.hpp"

#include <catch2/catch.hpp>

#include "scenarios.hpp"
#include "sim/simulate.hpp"

using namespace osdp;
using namespace osdp::sim;
using namespace osdp::sim::test;

namespace {

std::string scenario_path(const std::string& name) {
  return std::string(OSDP_SOURCE_DIR) + "/scenarios/" + name;
}

}  // namespace

TEST_CASE("simulation options are read strictly", "[sim][options]") {
  SECTION("every key") {
    const Json json = Json::parse(R"({"collectives": "scale", "forward_prefetch": 2,
      "backward_prefetch": "none", "units_in_flight": 3, "separate_reduce_scatter_lane": true,
      "overlap_slowdown": 1.2, "kernel_launch": "7us",
      "network": {"model": "LV08", "crosstraffic": true, "tcp_gamma": 4194304}})");
    const SimOptions options = read_sim_options(json, "s.json");
    CHECK(options.granularity == Granularity::scale);
    CHECK(options.forward_prefetch == 2);
    CHECK(options.backward_prefetch == BackwardPrefetch::none);
    CHECK(options.units_in_flight == 3);
    CHECK(options.separate_reduce_scatter_lane);
    CHECK(*options.overlap_slowdown == 1.2);
    CHECK(*options.kernel_launch_s == Approx(7e-6));
    CHECK(options.network.model == "LV08");
    CHECK(options.network.crosstraffic);
    CHECK(options.network.tcp_gamma == 4194304);
  }
  SECTION("defaults: CM02 without crosstraffic, TCP-gamma 0") {
    const SimOptions options = read_sim_options(Json::object(), "s.json");
    CHECK(options.network.model == "CM02");
    CHECK_FALSE(options.network.crosstraffic);
    CHECK(options.network.tcp_gamma == 0);
    CHECK(options.units_in_flight == 2);
    CHECK(options.granularity == Granularity::automatic);
    CHECK(resolve_granularity(options.granularity, 32) == Granularity::step);
    CHECK(resolve_granularity(options.granularity, 64) == Granularity::scale);
    CHECK(resolve_granularity(Granularity::step, 1024) == Granularity::step);
  }
  SECTION("bad input names the file, the path and what was expected") {
    const auto message = [](const char* text) {
      try {
        (void)read_sim_options(Json::parse(text), "s.json");
      } catch (const InputError& error) {
        return std::string(error.what()) + " @" + error.json_path();
      }
      return std::string("no error");
    };
    CHECK(message(R"({"units_in_fligth": 2})").find("$.simulation") != std::string::npos);
    CHECK(message(R"({"units_in_fligth": 2})").find("units_in_flight") != std::string::npos);
    CHECK(message(R"({"collectives": "fast"})").find("$.simulation.collectives") !=
          std::string::npos);
    CHECK(message(R"({"units_in_flight": 0})").find("units_in_flight") != std::string::npos);
    CHECK(message(R"({"overlap_slowdown": 0.5})").find("overlap_slowdown") != std::string::npos);
    CHECK(message(R"({"network": {"model": "CM03"}})").find("$.simulation.network.model") !=
          std::string::npos);
    CHECK(message(R"([1])").find("an object") != std::string::npos);
  }
}

TEST_CASE("shipped simulator scenarios load and simulate", "[sim][scenario]") {
  for (const char* name : {"sim-titan-nd-48l-fsdp.json", "sim-a100-2x8-hsdp.json"}) {
    INFO(name);
    const Scenario scenario = load_scenario(scenario_path(name));
    const SimOptions options = read_sim_options(scenario.simulation, scenario.file);
    const Plan plan = uniform_plan(scenario, 1, OperatorChoice::whole(Mode::zdp));
    const SimulationResult result = simulate_plan(scenario, plan, options);
    const PlanCost analytic = scenario.cost_model().plan_cost(plan);
    // The same kernels, plus one CPU launch gap per kernel (forward 1, backward 2) and the
    // compute slowdown while gathers overlap.
    const double launches = 3.0 * scenario.workload->size() * scenario.cluster.gpu.kernel_launch_s;
    const double slowdown = options.overlap_slowdown.value_or(1.0);
    CHECK(result.compute_s >= analytic.compute_s + launches - 1e-9);
    CHECK(result.compute_s <= (analytic.compute_s + launches) * slowdown + 1e-9);
    // Overlap can only help: the analytic model serialises compute and communication.
    CHECK(result.iteration_time_s <= analytic.iteration_time_s + launches * slowdown +
                                         analytic.compute_s * (slowdown - 1) + 1e-9);
    CHECK(result.iteration_time_s >= result.compute_s);
  }
}

TEST_CASE("the paper-form cluster separates overlap from the analytic sum", "[sim][scenario]") {
  const Scenario scenario = load_scenario(scenario_path("paper-form.json"));
  const Plan plan = uniform_plan(scenario, 4, OperatorChoice::whole(Mode::zdp));
  SimOptions no_prefetch;
  no_prefetch.forward_prefetch = 0;
  no_prefetch.backward_prefetch = BackwardPrefetch::none;
  no_prefetch.kernel_launch_s = 0.0;
  const SimulationResult serial = simulate_plan(scenario, plan, no_prefetch);
  const PlanCost analytic = scenario.cost_model().plan_cost(plan);
  // One operator, nothing to prefetch across: the simulation is the analytic sum.
  CHECK(serial.iteration_time_s == Approx(analytic.iteration_time_s).epsilon(1e-6));
  CHECK(serial.compute_s == Approx(analytic.compute_s).epsilon(1e-9));
}

TEST_CASE("plans that do not fit the workload are input errors", "[sim][options]") {
  ChainSpec spec;
  const Scenario scenario = chain_scenario(spec, logical_cluster(4, 1e-6, 1e-10));
  Plan plan = uniform_plan(scenario, 1, OperatorChoice::whole(Mode::zdp));
  plan.choices.pop_back();
  CHECK_THROWS_AS(simulate_plan(scenario, plan, SimOptions{}), InputError);
  plan = uniform_plan(scenario, 1, OperatorChoice::whole(Mode::hsdp));  // one node only
  CHECK_THROWS_AS(simulate_plan(scenario, plan, SimOptions{}), InputError);
}
