// FSDP units (model/wrapping): the wrapping rules give the units PyTorch's auto-wrap policies
// would, a wrapped model conserves every size of the operators it holds, its compute is the sum
// of its members' laws, and fewer collectives cost less latency for the same bytes.
#include <catch2/catch.hpp>
#include <numeric>

#include "model/input_error.hpp"
#include "model/mode.hpp"
#include "model/plan_json.hpp"
#include "model/scenario.hpp"
#include "model/wrapping.hpp"

namespace osdp {
namespace {

Scenario gpt_scenario(int layers, const std::string& cost_model = "extended") {
  const Json document = {
      {"name", "wrapped"},
      {"model",
       {{"family", "gpt"},
        {"layers", layers},
        {"hidden", 512},
        {"heads", 8},
        {"sequence_length", 128},
        {"vocabulary", 8192}}},
      {"cluster", "clusters/titan-rtx-8x-pcie3.json"},
      {"training", {{"precision", "fp32"}, {"optimizer", "adam"}, {"memory_limit", "8GiB"}}},
      {"cost_model", cost_model}};
  return scenario_from_json(document, std::string(OSDP_SOURCE_DIR) + "/scenarios/wrapped.json");
}

double sum_of(const Workload& workload, double Operator::*field) {
  double total = 0;
  for (const Operator& op : workload.operators()) total += op.*field;
  return total;
}

}  // namespace

TEST_CASE("wrapping rules give PyTorch's units", "[model][wrapping]") {
  const Scenario scenario = gpt_scenario(4);
  const Workload& gpt = *scenario.workload;  // embedding, 4 x (attention, mlp), head
  CHECK(unit_sizes(gpt, {}) == std::vector<int>(10, 1));
  CHECK(unit_sizes(gpt, {WrappingRule::Kind::per_block}) == std::vector<int>{1, 2, 2, 2, 2, 1});
  CHECK(unit_sizes(gpt, {WrappingRule::Kind::per_block, 2}) == std::vector<int>{3, 4, 3});
  // A minimum no operator reaches alone: operators grouped until a unit holds it; the rest
  // joins the last unit (PyTorch's root unit).
  const double block_parameters = gpt.op(1).parameter_count + gpt.op(2).parameter_count;
  const std::vector<int> by_size =
      unit_sizes(gpt, {WrappingRule::Kind::min_parameters, 1, 1.5 * block_parameters});
  REQUIRE(valid_unit_sizes(gpt, by_size));
  int first = 0;
  for (std::size_t u = 0; u < by_size.size(); ++u) {
    double parameters = 0;
    for (int i = first; i < first + by_size[u]; ++i) parameters += gpt.op(i).parameter_count;
    CHECK(parameters >= 1.5 * block_parameters);
    first += by_size[u];
  }
  // A minimum larger than the model: one unit.
  CHECK(unit_sizes(gpt, {WrappingRule::Kind::min_parameters, 1, 1e15}) == std::vector<int>{10});
  CHECK_FALSE(valid_unit_sizes(gpt, {1, 2}));
  CHECK_FALSE(valid_unit_sizes(gpt, {0, 10}));
  CHECK_THROWS(wrap_workload(gpt, {1, 2}));
}

TEST_CASE("a wrapped model conserves its operators' sizes", "[model][wrapping]") {
  const Scenario scenario = gpt_scenario(4);
  const Workload& gpt = *scenario.workload;
  const Workload wrapped = wrap_workload(gpt, {1, 2, 2, 2, 2, 1});
  REQUIRE(wrapped.size() == 6);
  for (double Operator::*field :
       {&Operator::parameter_count, &Operator::parameter_bytes, &Operator::gradient_bytes,
        &Operator::optimizer_bytes, &Operator::activation_bytes_per_sample, &Operator::extra_bytes,
        &Operator::forward_flops_per_sample, &Operator::backward_flops_per_sample}) {
    CHECK(sum_of(wrapped, field) == Approx(sum_of(gpt, field)).epsilon(1e-12));
  }
  // A unit of one operator is that operator; a unit of several is named by its first and last.
  CHECK(wrapped.op(0).name == "embedding");
  CHECK(wrapped.op(0).members.empty());
  CHECK(wrapped.op(1).name == "layer0.attention..layer0.mlp");
  CHECK(wrapped.op(1).members.size() == 2);
  CHECK_FALSE(wrapped.op(1).splittable);
  CHECK(wrapped.op(1).input_activation_bytes_per_sample ==
        gpt.op(1).input_activation_bytes_per_sample);
  CHECK(wrapped.op(1).workspace_bytes_per_sample ==
        std::max(gpt.op(1).workspace_bytes_per_sample, gpt.op(2).workspace_bytes_per_sample));
  CHECK(wrapped.execution_order() == std::vector<int>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("a unit computes as its members and saves collective latency", "[model][wrapping]") {
  const Scenario scenario = gpt_scenario(4, "paper");
  const Workload wrapped = wrap_workload(*scenario.workload, {1, 2, 2, 2, 2, 1});
  const CostModel model = scenario.cost_model();
  const CostModel unit_model(wrapped, scenario.cluster, scenario.training, scenario.cost);
  for (bool backward : {false, true}) {
    const Linear unit =
        backward ? unit_model.backward_compute_s(1) : unit_model.forward_compute_s(1);
    const Linear attention = backward ? model.backward_compute_s(1) : model.forward_compute_s(1);
    const Linear mlp = backward ? model.backward_compute_s(2) : model.forward_compute_s(2);
    CHECK(unit.fixed == Approx(attention.fixed + mlp.fixed));
    CHECK(unit.per_sample == Approx(attention.per_sample + mlp.per_sample));
  }
  // ZDP's collectives are affine in the bytes (ring: (N-1) steps of latency + S/N): one unit of
  // two operators sends the same bytes and pays one set of latencies less.
  const OperatorChoice zdp = OperatorChoice::whole(Mode::zdp);
  const double unit_s = unit_model.option_cost(1, zdp).communication_s;
  const double members_s =
      model.option_cost(1, zdp).communication_s + model.option_cost(2, zdp).communication_s;
  const int ranks = scenario.cluster.ranks;
  const GroupTiming& world = group_timing(GroupAxis::data, scenario.cluster);
  const double latency_s = 2 * world.time_s(CollectiveKind::all_gather, 0, ranks) +
                           world.time_s(CollectiveKind::reduce_scatter, 0, ranks);
  REQUIRE(latency_s > 0);
  CHECK(members_s - unit_s == Approx(latency_s).epsilon(1e-6));
}

TEST_CASE("plans of units are written and read back", "[model][wrapping]") {
  const Scenario scenario = gpt_scenario(4);
  const CostModel model = scenario.cost_model();
  Plan plan;
  plan.batch_size = 3;
  plan.unit_sizes = {1, 2, 2, 2, 2, 1};
  plan.choices.assign(6, OperatorChoice::whole(Mode::zdp));
  plan.choices[2] = OperatorChoice::whole(Mode::dp);
  const Json document = plan_to_json(plan, *scenario.workload);
  CHECK(document["units"] == Json({1, 2, 2, 2, 2, 1}));
  CHECK(document["operators"][1]["name"] == "layer0.attention..layer0.mlp");
  const Plan read = load_plan(JsonReader(document, "plan.json"), *scenario.workload, model);
  CHECK(read.unit_sizes == plan.unit_sizes);
  CHECK(read.choices == plan.choices);
  // The scenario for the plan is costed on the units.
  const Scenario planned = scenario.for_plan(read);
  CHECK(planned.workload->size() == 6);
  CHECK(planned.cost_model().plan_cost(read).peak_memory_bytes > 0);

  Json bad = document;
  bad["units"] = {1, 2, 2};
  try {
    (void)load_plan(JsonReader(bad, "plan.json"), *scenario.workload, model);
    FAIL("units that do not cover the model were accepted");
  } catch (const InputError& error) {
    CHECK(std::string(error.what()).find("$.units") != std::string::npos);
  }
  bad = document;
  bad["operators"][1]["name"] = "layer0.attention";  // an operator, not a unit of this plan
  CHECK_THROWS_AS(load_plan(JsonReader(bad, "plan.json"), *scenario.workload, model), InputError);
}

}  // namespace osdp
