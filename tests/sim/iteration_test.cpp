#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "model/json_reader.hpp"
#include "scenarios.hpp"
#include "sim/program.hpp"
#include "sim/simulate.hpp"

using namespace osdp;
using namespace osdp::sim;
using namespace osdp::sim::test;

namespace {

double sum(const std::array<double, comm_categories>& values) {
  double total = 0;
  for (double v : values) total += v;
  return total;
}

double exposed(const SimulationResult& result, CommCategory category) {
  return result.exposed_comm_s[static_cast<int>(category)];
}

}  // namespace

TEST_CASE("zero communication gives the sum of compute", "[sim][iteration]") {
  ChainSpec spec;
  const Scenario scenario = chain_scenario(spec, logical_cluster(4, 0.0, 0.0));
  const int batch = 3;
  for (Mode mode : {Mode::dp, Mode::zdp, Mode::z2}) {
    const SimulationResult result = simulate_plan(
        scenario, uniform_plan(scenario, batch, OperatorChoice::whole(mode)), SimOptions{});
    const double expected = spec.operators * batch * spec.compute_s_per_sample;
    CHECK(result.iteration_time_s == Approx(expected).epsilon(1e-9));
    CHECK(result.compute_s == Approx(expected).epsilon(1e-9));
    CHECK(sum(result.exposed_comm_s) == Approx(0.0).margin(1e-12));
    CHECK(result.throughput_samples_per_s == Approx(4 * batch / expected).epsilon(1e-9));
  }
  SECTION("checkpointing adds one forward per operator") {
    const SimulationResult result = simulate_plan(
        scenario,
        uniform_plan(scenario, batch, OperatorChoice::whole(Mode::zdp, Checkpoint::unfused)),
        SimOptions{});
    CHECK(result.iteration_time_s ==
          Approx(spec.operators * batch * spec.compute_s_per_sample * 4 / 3).epsilon(1e-9));
  }
}

TEST_CASE("zero compute gives the sum of serialised communication", "[sim][iteration]") {
  ChainSpec spec;
  spec.compute_s_per_sample = 0;
  const double alpha = 20e-6;
  const double beta = 1.0 / 10e9;
  const int ranks = 8;
  for (const Cluster& cluster : {logical_cluster(ranks, alpha, beta), nvswitch_cluster(1, 1)}) {
    const Scenario scenario = chain_scenario(spec, cluster);
    const AlphaBeta ab = cluster.world.all_gather.alpha_beta;
    const double ag = ring_time_s(CollectiveKind::all_gather, spec.parameter_bytes, ranks, ab);
    const double rs = ring_time_s(CollectiveKind::reduce_scatter, spec.parameter_bytes, ranks, ab);
    const double ar = ring_time_s(CollectiveKind::all_reduce, spec.parameter_bytes, ranks, ab);
    const int n = spec.operators;
    struct Case {
      OperatorChoice choice;
      double expected_s;
    };
    for (const Case& c :
         {Case{OperatorChoice::whole(Mode::dp), n * ar},
          Case{OperatorChoice::whole(Mode::zdp), n * (2 * ag + rs)},
          Case{OperatorChoice::whole(Mode::z2), n * (ag + rs)},
          Case{OperatorChoice::whole(Mode::z1, Checkpoint::unfused), n * (rs + ag)},
          Case{OperatorChoice::whole(Mode::zdp, Checkpoint::unfused), n * (3 * ag + rs)},
          Case{OperatorChoice::whole(Mode::zdp, Checkpoint::fused), n * (2 * ag + rs)},
          Case{OperatorChoice{Mode::zdp, 4, 2, Checkpoint::none},
               n * (2 * 2 * ag / 4 + 2 * rs / 4) + n * ar / 2}}) {
      INFO(describe(c.choice));
      // Slices move a quarter (or half) of the bytes but pay every step's latency.
      double expected = c.expected_s;
      if (c.choice.slices == 4) {
        const double q = spec.parameter_bytes / 4;
        expected = n * (2 * 2 * ring_time_s(CollectiveKind::all_gather, q, ranks, ab) +
                        2 * ring_time_s(CollectiveKind::reduce_scatter, q, ranks, ab) +
                        ring_time_s(CollectiveKind::all_reduce, 2 * q, ranks, ab));
      }
      const SimulationResult result =
          simulate_plan(scenario, uniform_plan(scenario, 2, c.choice), SimOptions{});
      CHECK(result.iteration_time_s == Approx(expected).epsilon(1e-6));
      CHECK(sum(result.exposed_comm_s) == Approx(expected).epsilon(1e-6));
    }
  }
}

TEST_CASE("FSDP peak memory on a uniform chain equals its closed form", "[sim][memory]") {
  ChainSpec spec;
  const int ranks = 8;
  const Scenario scenario = chain_scenario(spec, logical_cluster(ranks, 10e-6, 1.0 / 20e9));
  const int batch = 2;
  const Plan plan = uniform_plan(scenario, batch, OperatorChoice::whole(Mode::zdp));
  const SimulationResult result = simulate_plan(scenario, plan, SimOptions{});
  const double p = spec.parameter_bytes;
  const double n = spec.operators;
  // Sharded states and extra buffers, every saved activation, two gathered units (the current
  // and the prefetched one), the current unit's full gradient and its workspace.
  const double expected = n * (4 * p / ranks + spec.extra_bytes) +
                          n * batch * spec.activation_bytes_per_sample + 2 * p + p +
                          batch * spec.workspace_bytes_per_sample;
  CHECK(result.peak_memory_bytes == Approx(expected).epsilon(1e-12));
  // The extended cost model counts the same terms.
  CHECK(result.peak_memory_bytes ==
        Approx(scenario.cost_model().plan_cost(plan).peak_memory_bytes).epsilon(1e-12));
  CHECK(result.peak_breakdown_bytes[static_cast<int>(MemoryCategory::gathered_parameters)] ==
        Approx(2 * p));
  CHECK(result.peak_memory_cause.find("op" + std::to_string(spec.operators - 2)) !=
        std::string::npos);
  for (double peak : result.peak_memory_bytes_per_rank) CHECK(peak == Approx(expected));
}

TEST_CASE("the rate limiter bounds gathered units", "[sim][memory]") {
  ChainSpec spec;
  spec.compute_s_per_sample = 1e-3;
  const Scenario scenario = chain_scenario(spec, logical_cluster(4, 1e-6, 1.0 / 100e9));
  const Plan plan = uniform_plan(scenario, 1, OperatorChoice::whole(Mode::zdp));
  for (int units : {1, 2, 3}) {
    SimOptions options;
    options.units_in_flight = units;
    const SimulationResult result = simulate_plan(scenario, plan, options);
    INFO(units << " units in flight");
    CHECK(result.peak_breakdown_bytes[static_cast<int>(MemoryCategory::gathered_parameters)] <=
          units * spec.parameter_bytes * (1 + 1e-12));
  }
}

TEST_CASE("prefetch hides gathers behind compute", "[sim][iteration]") {
  ChainSpec spec;
  spec.operators = 8;
  spec.compute_s_per_sample = 6e-3;
  // Gathers shorter than each compute: prefetch hides all but the first.
  const Scenario scenario = chain_scenario(spec, logical_cluster(8, 5e-6, 1.0 / 50e9));
  const Plan plan = uniform_plan(scenario, 4, OperatorChoice::whole(Mode::zdp));
  SimOptions prefetch;
  SimOptions none;
  none.forward_prefetch = 0;
  none.backward_prefetch = BackwardPrefetch::none;
  const SimulationResult hidden = simulate_plan(scenario, plan, prefetch);
  const SimulationResult exposed_run = simulate_plan(scenario, plan, none);
  CHECK(hidden.iteration_time_s < exposed_run.iteration_time_s);
  const double ag = ring_time_s(CollectiveKind::all_gather, spec.parameter_bytes, 8,
                                scenario.cluster.world.all_gather.alpha_beta);
  CHECK(exposed(hidden, CommCategory::ag_forward) == Approx(ag).epsilon(1e-6));
  CHECK(exposed(exposed_run, CommCategory::ag_forward) ==
        Approx(spec.operators * ag).epsilon(1e-6));
  SECTION("slowdown while communication overlaps") {
    SimOptions slow = prefetch;
    slow.overlap_slowdown = 1.5;
    const SimulationResult slowed = simulate_plan(scenario, plan, slow);
    CHECK(slowed.compute_s > hidden.compute_s);
    CHECK(slowed.iteration_time_s > hidden.iteration_time_s);
  }
}

TEST_CASE("HSDP, Z2 and sliced plans complete on a two-node cluster", "[sim][iteration]") {
  ChainSpec spec;
  const Scenario scenario = chain_scenario(spec, nvswitch_cluster(2, 2));
  for (OperatorChoice choice :
       {OperatorChoice::whole(Mode::hsdp), OperatorChoice::whole(Mode::hsdp, Checkpoint::fused),
        OperatorChoice{Mode::z2, 2, 1, Checkpoint::unfused},
        OperatorChoice{Mode::zdp, 4, 3, Checkpoint::unfused}}) {
    INFO(describe(choice));
    const SimulationResult result =
        simulate_plan(scenario, uniform_plan(scenario, 2, choice), SimOptions{});
    CHECK(result.iteration_time_s > spec.operators * 2 * spec.compute_s_per_sample);
    CHECK(result.peak_memory_bytes_per_rank.size() == 16);
    if (choice.mode == Mode::hsdp) CHECK(result.collectives > 0);
  }
}

TEST_CASE("same input, byte-identical output", "[sim][determinism]") {
  ChainSpec spec;
  const Scenario scenario = chain_scenario(spec, pcie_cluster(1, 2));
  const Plan plan = uniform_plan(scenario, 2, OperatorChoice::whole(Mode::zdp, Checkpoint::fused));
  const std::string dir = OSDP_BINARY_DIR;
  const SimulationResult first =
      simulate_plan(scenario, plan, SimOptions{}, dir + "/sim-trace-a.json");
  const SimulationResult second =
      simulate_plan(scenario, plan, SimOptions{}, dir + "/sim-trace-b.json");
  CHECK(to_json(first).dump() == to_json(second).dump());
  const Json a = read_json_file(dir + "/sim-trace-a.json");
  const Json b = read_json_file(dir + "/sim-trace-b.json");
  CHECK(a.dump() == b.dump());
  SECTION("the trace has a process per rank, compute and communication tracks, memory") {
    int complete = 0, counters = 0, processes = 0;
    bool communication = false;
    for (const Json& event : a.at("traceEvents")) {
      const std::string ph = event.at("ph");
      if (ph == "X") {
        ++complete;
        communication = communication || event.at("tid").get<int>() > 0;
        CHECK(event.at("dur").get<double>() >= 0);
      }
      if (ph == "C") ++counters;
      if (ph == "M" && event.at("name") == "process_name") ++processes;
    }
    CHECK(processes == 8);
    CHECK(complete > 0);
    CHECK(counters > 0);
    CHECK(communication);
    CHECK(a.at("otherData").at("time_unit") == "us");
    // Every allocation is freed by the end: what is left is the persistent model states and
    // extra buffers.
    double last_rank0 = -1;
    for (const Json& event : a.at("traceEvents")) {
      if (event.at("ph") == "i" && event.at("pid") == 0)
        last_rank0 = event.at("args").at("live_bytes");
    }
    CHECK(last_rank0 == Approx(spec.operators * (4 * spec.parameter_bytes / 8 + spec.extra_bytes)));
  }
}

TEST_CASE("the trace's compute waits add up to each rank's exposed communication",
          "[sim][iteration]") {
  ChainSpec spec;
  const Scenario scenario = chain_scenario(spec, pcie_cluster(1, 2));
  const Plan plan =
      uniform_plan(scenario, 2, OperatorChoice::whole(Mode::zdp, Checkpoint::unfused));
  const std::string path = std::string(OSDP_BINARY_DIR) + "/sim-trace-waits.json";
  const SimulationResult result = simulate_plan(scenario, plan, SimOptions{}, path, 2);
  const Json trace = read_json_file(path);
  std::map<int, double> waited_us;
  std::map<int, bool> named;
  for (const Json& event : trace.at("traceEvents")) {
    if (event.at("ph") == "M" && event.at("name") == "thread_name" &&
        event.at("args").at("name") == "compute waits") {
      named[event.at("pid").get<int>()] = true;
    }
    if (event.at("ph") != "X" || event.at("cat") != "wait") continue;
    const double start_us = event.at("ts");
    const double duration_us = event.at("dur");
    CHECK(duration_us > 0);
    CHECK(start_us >= 0);
    CHECK(start_us + duration_us <= result.iteration_time_s * 1e6 * (1 + 1e-9));
    // What it waited for: one of ZDP's collectives (the gathers, the last reduce-scatters before
    // the optimizer step).
    const std::string waited_for = event.at("args").at("for");
    CHECK((waited_for.rfind("all-gather ", 0) == 0 || waited_for.rfind("reduce-scatter ", 0) == 0));
    waited_us[event.at("pid").get<int>()] += duration_us;
  }
  for (int rank : {0, 1}) {
    INFO("rank " << rank);
    REQUIRE(result.exposed_comm_total_s_per_rank[rank] > 0);  // PCIe: the gathers show
    CHECK(named[rank]);
    CHECK(waited_us[rank] * 1e-6 ==
          Approx(result.exposed_comm_total_s_per_rank[rank]).epsilon(1e-9));
  }
}

TEST_CASE("compute, optimizer step and exposed communication add up to the iteration",
          "[sim][iteration]") {
  ChainSpec spec;
  Cluster cluster = nvswitch_cluster(2, 1);
  cluster.gpu.memory_bandwidth_Bps = 1e12;  // a real optimizer step and slice adds
  const Scenario scenario = chain_scenario(spec, cluster);
  SimOptions separate;
  separate.separate_reduce_scatter_lane = true;
  separate.overlap_slowdown = 1.2;
  for (const SimOptions& options : {SimOptions{}, separate}) {
    for (OperatorChoice choice :
         {OperatorChoice::whole(Mode::dp), OperatorChoice::whole(Mode::zdp, Checkpoint::unfused),
          OperatorChoice::whole(Mode::z2), OperatorChoice::whole(Mode::hsdp, Checkpoint::fused),
          OperatorChoice{Mode::zdp, 4, 2, Checkpoint::none}, OperatorChoice::whole(Mode::z1),
          OperatorChoice{Mode::z1, 2, 1, Checkpoint::unfused}}) {
      INFO(describe(choice) << (options.separate_reduce_scatter_lane ? ", separate lane" : ""));
      const SimulationResult result =
          simulate_plan(scenario, uniform_plan(scenario, 2, choice), options);
      CHECK(result.iteration_time_s ==
            Approx(result.compute_s + result.optimizer_step_s + result.exposed_comm_total_s())
                .epsilon(1e-9));
      CHECK(result.optimizer_step_s > 0);
    }
  }
}

TEST_CASE("plans simulated side by side equal plans simulated one by one", "[sim][iteration]") {
  ChainSpec spec;
  const Scenario scenario = chain_scenario(spec, nvswitch_cluster(1, 1));
  std::vector<Plan> plans;
  for (Mode mode : {Mode::dp, Mode::zdp, Mode::z2}) {
    plans.push_back(uniform_plan(scenario, 2, OperatorChoice::whole(mode)));
  }
  const std::vector<SimulationResult> together = simulate_plans(scenario, plans, SimOptions{}, 2);
  REQUIRE(together.size() == plans.size());
  for (std::size_t i = 0; i < plans.size(); ++i) {
    CHECK(to_json(together[i]).dump() ==
          to_json(simulate_plan(scenario, plans[i], SimOptions{})).dump());
  }
  plans.back().choices.pop_back();  // an invalid plan fails before any simulation runs
  CHECK_THROWS_AS(simulate_plans(scenario, plans, SimOptions{}), InputError);
}

TEST_CASE("mixed plans finish under every prefetch policy", "[sim][iteration]") {
  ChainSpec spec;
  spec.operators = 7;
  Cluster cluster = logical_cluster(8, 5e-6, 1.0 / 20e9);
  cluster.gpus_per_node = 4;  // two nodes for HSDP
  cluster.gpu.memory_bandwidth_Bps = 1e12;
  const Scenario scenario = chain_scenario(spec, cluster);
  const std::vector<OperatorChoice> mix{OperatorChoice::whole(Mode::zdp, Checkpoint::fused),
                                        OperatorChoice{Mode::zdp, 4, 3, Checkpoint::unfused},
                                        OperatorChoice::whole(Mode::dp, Checkpoint::unfused),
                                        OperatorChoice{Mode::z2, 2, 1, Checkpoint::none},
                                        OperatorChoice::whole(Mode::hsdp, Checkpoint::unfused),
                                        OperatorChoice{Mode::zdp, 2, 2, Checkpoint::fused},
                                        OperatorChoice::whole(Mode::zdp)};
  for (int rotation = 0; rotation < 3; ++rotation) {
    Plan plan{2, {}, 0, {}};
    for (int i = 0; i < spec.operators; ++i)
      plan.choices.push_back(mix[(i + rotation) % mix.size()]);
    for (BackwardPrefetch policy :
         {BackwardPrefetch::pre, BackwardPrefetch::post, BackwardPrefetch::none}) {
      for (int forward : {0, 1, 3}) {
        for (int units : {1, 2, 4}) {
          SimOptions options;
          options.backward_prefetch = policy;
          options.forward_prefetch = forward;
          options.units_in_flight = units;
          options.separate_reduce_scatter_lane = units == 2;
          INFO("rotation " << rotation << ", " << backward_prefetch_name(policy) << ", forward "
                           << forward << ", units " << units);
          const SimulationResult result = simulate_plan(scenario, plan, options);
          CHECK(result.iteration_time_s ==
                Approx(result.compute_s + result.optimizer_step_s + result.exposed_comm_total_s())
                    .epsilon(1e-9));
          // The rate limiter bounds re-gathered units; Z2 slices stay gathered until backward.
          double held = 0;
          for (const OperatorChoice& c : plan.choices) {
            if (c.mode == Mode::z2) held += spec.parameter_bytes * c.sharded_slices / c.slices;
          }
          CHECK(
              result.peak_breakdown_bytes[static_cast<int>(MemoryCategory::gathered_parameters)] <=
              units * spec.parameter_bytes + held + 1.0);
        }
      }
    }
  }
}

TEST_CASE("traces hold the requested ranks only", "[sim][determinism]") {
  ChainSpec spec;
  spec.operators = 3;
  const Scenario scenario = chain_scenario(spec, nvswitch_cluster(1, 1));
  const Plan plan = uniform_plan(scenario, 1, OperatorChoice::whole(Mode::zdp));
  const std::string path = std::string(OSDP_BINARY_DIR) + "/sim-trace-3-ranks.json";
  (void)simulate_plan(scenario, plan, SimOptions{}, path, 3);
  std::set<int> pids;
  const Json trace = read_json_file(path);
  for (const Json& event : trace.at("traceEvents")) pids.insert(event.at("pid").get<int>());
  CHECK(pids == std::set<int>{0, 1, 2});
}

TEST_CASE("calibrated compute laws: slices share the fixed part and add their measured cost",
          "[sim][iteration]") {
  ChainSpec spec;
  Scenario scenario = chain_scenario(spec, logical_cluster(4, 0.0, 0.0));
  // Operators described by FLOPs and a kind with a law instead of a given gamma.
  std::vector<Operator> operators = scenario.workload->operators();
  for (Operator& op : operators) {
    op.kind = OperatorKind::mlp;
    op.compute_s_per_sample.reset();
    op.forward_compute_s_per_sample.reset();
    op.forward_flops_per_sample = 2e9;
    op.backward_flops_per_sample = 4e9;
  }
  scenario.workload = std::make_shared<const Workload>(Workload::chain("chain", operators));
  scenario.cluster.gpu.compute_flops_per_s = 1e12;
  scenario.cluster.gpu.operator_compute["mlp"] = {{2e-4, 5e11, 3e-5}, {7e-4, std::nullopt, 4e-5}};
  const int batch = 3;
  OperatorChoice sliced = OperatorChoice::whole(Mode::zdp, Checkpoint::unfused);
  sliced.slices = sliced.sharded_slices = 2;
  for (const OperatorChoice& choice : {OperatorChoice::whole(Mode::dp), sliced}) {
    const Plan plan = uniform_plan(scenario, batch, choice);
    SimOptions options;
    options.kernel_launch_s = 0.0;
    const SimulationResult result = simulate_plan(scenario, plan, options);
    const PlanCost analytic = scenario.cost_model().plan_cost(plan);
    const int extra_slices = choice.slices - 1;
    const int forwards = choice.checkpoint == Checkpoint::none ? 1 : 2;
    const double per_operator =
        forwards * 2e-4 + 7e-4 + batch * (forwards * 2e9 / 5e11 + 4e9 / 1e12);
    CHECK(analytic.compute_s == Approx(spec.operators * per_operator).epsilon(1e-12));
    // The simulator runs the same work, the slices' measured extras included.
    const double slicing = spec.operators * extra_slices * (forwards * 3e-5 + 4e-5);
    CHECK(result.compute_s == Approx(analytic.compute_s + slicing).epsilon(1e-9));
    CHECK(result.compute_s ==
          Approx(analytic.iteration_time_s - analytic.communication_s - analytic.optimizer_step_s)
              .epsilon(1e-9));
  }
}

TEST_CASE("checkpointed slices run as the runtime runs them", "[sim][iteration]") {
  ChainSpec spec;
  spec.operators = 2;
  const Scenario scenario = chain_scenario(spec, logical_cluster(4, 5e-6, 1.0 / 20e9));
  const CostModel model = scenario.cost_model();
  // The compute items of operator `op` after the forward pass, as (phase, slice).
  auto backward_order = [&](const Plan& plan, int op, const SimOptions& options) {
    const Program program = build_program(model, plan, options);
    std::vector<std::pair<Phase, int>> order;
    for (const ProgramItem& item : program.items) {
      if (!item.collective && item.op == op && item.phase != Phase::forward) {
        order.emplace_back(item.phase, item.slice);
      }
    }
    return order;
  };
  SECTION("all slices recompute, first to last, then run backward, last to first") {
    for (Checkpoint checkpoint : {Checkpoint::unfused, Checkpoint::fused}) {
      const Plan plan = uniform_plan(scenario, 2, OperatorChoice{Mode::zdp, 3, 3, checkpoint});
      const std::vector<std::pair<Phase, int>> expected{
          {Phase::recompute, 0}, {Phase::recompute, 1}, {Phase::recompute, 2},
          {Phase::backward, 2},  {Phase::backward, 1},  {Phase::backward, 0}};
      CHECK(backward_order(plan, 1, SimOptions{}) == expected);
    }
  }
  SECTION("a fused recompute keeps every slice it gathered until that slice's backward") {
    const Plan plan = uniform_plan(scenario, 2, OperatorChoice{Mode::zdp, 4, 4, Checkpoint::fused});
    for (int units : {1, 2}) {
      SimOptions options;
      options.units_in_flight = units;
      const SimulationResult result = simulate_plan(scenario, plan, options);
      const double gathered =
          result.peak_breakdown_bytes[static_cast<int>(MemoryCategory::gathered_parameters)];
      CHECK(gathered >= spec.parameter_bytes - 1.0);
      // The cost model counts the same: the whole operator gathered at once.
      CHECK(model.option_cost(0, plan.choices[0]).transient_bytes.fixed ==
            Approx(spec.parameter_bytes + spec.parameter_bytes / 4));
    }
  }
  SECTION("under `pre`, a slice's backward gather waits for its unfused recompute to end") {
    const Plan plan =
        uniform_plan(scenario, 2, OperatorChoice::whole(Mode::zdp, Checkpoint::unfused));
    SimOptions options;
    options.backward_prefetch = BackwardPrefetch::pre;
    const Program program = build_program(model, plan, options);
    int recompute = -1;
    int checked = 0;
    for (int i = 0; i < static_cast<int>(program.items.size()); ++i) {
      const ProgramItem& item = program.items[i];
      if (!item.collective && item.phase == Phase::recompute) recompute = i;
      if (item.collective && item.category == CommCategory::ag_backward && recompute >= 0 &&
          program.items[recompute].op == item.op) {
        bool after_end = false;
        for (const Dep& dep : item.deps) {
          after_end |= dep.item == recompute && dep.on == DepOn::end;
          CHECK_FALSE((dep.item == recompute && dep.on == DepOn::start));
        }
        CHECK(after_end);
        ++checked;
      }
    }
    CHECK(checked == spec.operators);
  }
}

TEST_CASE("ZeRO-1 gathers the updated shards after the optimizer step, never for compute",
          "[sim][iteration]") {
  ChainSpec spec;
  Cluster cluster = nvswitch_cluster(1, 1);
  cluster.gpu.memory_bandwidth_Bps = 1e12;
  const Scenario scenario = chain_scenario(spec, cluster);
  const Plan plan = uniform_plan(scenario, 2, OperatorChoice::whole(Mode::z1, Checkpoint::unfused));
  const CostModel model = scenario.cost_model();
  const Program program = build_program(model, plan, SimOptions{});
  int gathers = 0;
  int scatters = 0;
  int last_compute = -1;
  for (int i = 0; i < static_cast<int>(program.items.size()); ++i) {
    const ProgramItem& item = program.items[i];
    if (!item.collective) {
      last_compute = i;
      continue;
    }
    CHECK(item.kind != CollectiveKind::all_reduce);
    if (item.kind == CollectiveKind::all_gather) {
      ++gathers;
      CHECK(item.category == CommCategory::ag_after_step);
      // Every gather waits for the optimizer step, which comes after every reduction.
      REQUIRE(!item.deps.empty());
      CHECK(program.items[item.deps.front().item].phase == Phase::optimizer);
    } else {
      ++scatters;
      CHECK(item.category == CommCategory::reduce_scatter);
    }
  }
  CHECK(gathers == spec.operators);
  CHECK(scatters == spec.operators);
  // The iteration ends with a compute item that waits for every gather (and the step).
  REQUIRE(last_compute >= 0);
  int gathers_awaited = 0;
  for (const Dep& dep : program.items[last_compute].deps) {
    gathers_awaited += program.items[dep.item].collective ? 1 : 0;
  }
  CHECK(gathers_awaited == spec.operators);
  const SimulationResult result = simulate_plan(scenario, plan, SimOptions{});
  CHECK(exposed(result, CommCategory::ag_after_step) > 0);
  // Whole parameters and gradients, 1/N of the optimizer states, as the cost model says.
  CHECK(result.peak_breakdown_bytes[static_cast<int>(MemoryCategory::model_states)] ==
        Approx(model.plan_cost(plan).peak.model_state_bytes).epsilon(1e-9));
}

TEST_CASE("scale mode's closed-form collectives give the iteration step mode's flows give",
          "[sim][iteration]") {
  // One lane of world collectives and no host copies: collectives run one at a time, alone on
  // the network, and scale mode charges each its uncontended ring time as a timer (no flows).
  // Step mode simulates every ring step as flows; the two iterations must agree.
  const ChainSpec spec;
  for (const Cluster& cluster :
       {nvswitch_cluster(4, 2), leaf_spine_cluster(4, 2, 1, 20e9), pcie_cluster(2, 2, 2, 2)}) {
    const Scenario scenario = chain_scenario(spec, cluster);
    for (const OperatorChoice& choice :
         {OperatorChoice::whole(Mode::zdp), OperatorChoice::whole(Mode::dp),
          OperatorChoice{Mode::z2, 2, 1, Checkpoint::fused, false}}) {
      const Plan plan = uniform_plan(scenario, 2, choice);
      SimOptions step;
      step.granularity = Granularity::step;
      SimOptions scale;
      scale.granularity = Granularity::scale;
      const SimulationResult flows = simulate_plan(scenario, plan, step);
      const SimulationResult closed = simulate_plan(scenario, plan, scale);
      CAPTURE(cluster.ranks, describe(choice));
      CHECK(closed.flows == 0);
      CHECK(flows.flows > 0);
      CHECK(closed.iteration_time_s == Approx(flows.iteration_time_s).epsilon(1e-6));
      CHECK(closed.peak_memory_bytes == Approx(flows.peak_memory_bytes).epsilon(1e-9));
    }
  }
}
