// The simulator runs each compute call for max(host floor, fixed + b x FLOPs / rate), as the
// cost model says.
#include <catch2/catch.hpp>

#include "model/cost_model.hpp"
#include "scenarios.hpp"
#include "sim/program.hpp"
#include "sim/simulate.hpp"

using namespace osdp;
using namespace osdp::sim;
using namespace osdp::sim::test;

namespace {

// A chain of MLP operators whose compute comes from the kind's law: forward 0.1 ms + b x 1 ms
// held up at 2 ms, backward 0.2 ms + b x 2 ms held up at 4 ms.
Scenario floored_chain(bool floor) {
  ChainSpec spec;
  Scenario scenario = chain_scenario(spec, logical_cluster(4, 0.0, 0.0));
  std::vector<Operator> operators;
  for (int i = 0; i < scenario.workload->size(); ++i) {
    Operator op = scenario.workload->op(i);
    op.kind = OperatorKind::mlp;
    op.compute_s_per_sample.reset();
    op.forward_compute_s_per_sample.reset();
    op.forward_flops_per_sample = 1e9;
    op.backward_flops_per_sample = 2e9;
    operators.push_back(op);
  }
  scenario.workload = std::make_shared<const Workload>(Workload::chain("mlps", operators));
  ComputeLaw forward{1e-4, 1e12, std::nullopt};
  ComputeLaw backward{2e-4, 1e12, std::nullopt};
  if (floor) {
    forward.host_floor_s = 2e-3;
    backward.host_floor_s = 4e-3;
  }
  scenario.cluster.gpu.operator_compute["mlp"] = {forward, backward};
  return scenario;
}

}  // namespace

TEST_CASE("compute items take max(host floor, law), and agree with the cost model",
          "[sim][floor]") {
  const Scenario floored = floored_chain(true);
  const Scenario linear = floored_chain(false);
  const int operators = floored.workload->size();
  for (int batch : {1, 2, 4}) {
    for (Checkpoint checkpoint : {Checkpoint::none, Checkpoint::unfused}) {
      INFO("batch " << batch << ", checkpoint " << static_cast<int>(checkpoint));
      const Plan plan = uniform_plan(floored, batch, OperatorChoice::whole(Mode::dp, checkpoint));
      const double forward = std::max(2e-3, 1e-4 + batch * 1e-3);
      const double backward = std::max(4e-3, 2e-4 + batch * 2e-3);
      const int forwards = checkpoint == Checkpoint::none ? 1 : 2;

      const CostModel model(*floored.workload, floored.cluster, floored.training, floored.cost);
      const Program program = build_program(model, plan, SimOptions{});
      for (const ProgramItem& item : program.items) {
        if (item.collective || item.phase == Phase::optimizer) continue;
        CHECK(item.work_s == Approx(item.phase == Phase::backward ? backward : forward));
      }
      const SimulationResult result = simulate_plan(floored, plan, SimOptions{});
      const double expected = operators * (forwards * forward + backward);
      CHECK(result.compute_s == Approx(expected).epsilon(1e-9));
      CHECK(result.iteration_time_s == Approx(expected).epsilon(1e-9));
      CHECK(model.plan_cost(plan).iteration_time_s == Approx(expected).epsilon(1e-9));
      // Without the floor: the linear law alone, which is never slower.
      const SimulationResult unfloored = simulate_plan(linear, plan, SimOptions{});
      CHECK(unfloored.iteration_time_s ==
            Approx(operators * (forwards * (1e-4 + batch * 1e-3) + 2e-4 + batch * 2e-3))
                .epsilon(1e-9));
      CHECK(unfloored.iteration_time_s <= result.iteration_time_s);
    }
  }
}
