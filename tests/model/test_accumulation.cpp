// Gradient accumulation and the gradient-reduction precision in the training setup and the
// cost models: m micro-batches repeat compute and sharded collectives, DP all-reduces once.
#include <catch2/catch.hpp>

#include "model/cost_model.hpp"
#include "model/input_error.hpp"
#include "model/scenario.hpp"

using namespace osdp;

namespace {

struct Setup {
  Workload workload = make_gpt({"tiny", 2, {256}, 4, 64, 1000, 1, 0.0}, Training{});
  Cluster cluster;
  Training training;

  Setup() {
    cluster.ranks = 4;
    cluster.gpus_per_node = 4;
    cluster.world = GroupTiming::uniform({5e-6, 1e-10});
    cluster.intra_node = cluster.world;
    cluster.inter_node = cluster.world;
    cluster.gpu.compute_flops_per_s = 1e12;
    cluster.gpu.memory_bandwidth_Bps = 1e12;
    ComputeLaw law{2e-4, 1e12, std::nullopt};
    cluster.gpu.operator_compute["mlp"] = {law, law};
    training.memory_limit_bytes = 1e12;
  }
  CostModel model() const { return CostModel(workload, cluster, training, {}); }
};

Plan uniform(const Workload& workload, int batch, OperatorChoice choice) {
  return {batch, std::vector<OperatorChoice>(workload.size(), choice), 0, {}};
}

}  // namespace

TEST_CASE("accumulation repeats compute per micro-batch and all-reduces DP once",
          "[cost][accumulation]") {
  Setup one;
  Setup four;
  four.training.accumulation_steps = 4;
  const int mlp = 2;  // embedding, attention, mlp, ...
  for (const OperatorChoice choice :
       {OperatorChoice::whole(Mode::dp), OperatorChoice::whole(Mode::dp, Checkpoint::unfused)}) {
    const OptionCost a = one.model().option_cost(mlp, choice);
    const OptionCost b = four.model().option_cost(mlp, choice);
    CHECK(b.compute_s.fixed == Approx(4 * a.compute_s.fixed));
    CHECK(b.compute_s.per_sample == Approx(4 * a.compute_s.per_sample));
    CHECK(b.communication_s == Approx(a.communication_s));  // one all-reduce per iteration
    CHECK(b.persistent_bytes.per_sample == Approx(a.persistent_bytes.per_sample));  // per micro
    CHECK(b.transient_bytes.at(3) == Approx(a.transient_bytes.at(3)));
    // Each further micro-batch runs the compute again, with its kernel launches (forward,
    // recompute, two backward).
    const int launches = choice.checkpoint == Checkpoint::none ? 3 : 4;
    CHECK(b.time_s.at(2) - a.time_s.at(2) ==
          Approx(3 * (a.compute_s.at(2) + launches * one.cluster.gpu.kernel_launch_s)));
  }
  SECTION("sharded modes gather and reduce-scatter in every micro-batch") {
    for (Mode mode : {Mode::zdp, Mode::z2}) {
      const OptionCost a = one.model().option_cost(mlp, OperatorChoice::whole(mode));
      const OptionCost b = four.model().option_cost(mlp, OperatorChoice::whole(mode));
      CHECK(b.communication_s == Approx(4 * a.communication_s));
      CHECK(b.persistent_bytes.fixed == Approx(a.persistent_bytes.fixed));
    }
  }
  SECTION("throughput counts every micro-batch's samples") {
    const Plan plan = uniform(four.workload, 2, OperatorChoice::whole(Mode::dp));
    const PlanCost cost = four.model().plan_cost(plan);
    CHECK(cost.throughput_samples_per_s == Approx(4 * 2 * 4 / cost.iteration_time_s));
  }
  SECTION("m micro-batches of b cost what one of m x b does, plus m - 1 fixed parts") {
    const Plan small = uniform(four.workload, 2, OperatorChoice::whole(Mode::dp));
    const Plan large = uniform(one.workload, 8, OperatorChoice::whole(Mode::dp));
    const PlanCost a = four.model().plan_cost(small);
    const PlanCost b = one.model().plan_cost(large);
    double fixed = 0;
    for (int i = 0; i < one.workload.size(); ++i) {
      fixed += one.model().option_cost(i, OperatorChoice::whole(Mode::dp)).compute_s.fixed;
    }
    CHECK(a.compute_s == Approx(b.compute_s + 3 * fixed));
    CHECK(a.communication_s == Approx(b.communication_s));
    CHECK(a.optimizer_step_s == Approx(b.optimizer_step_s));
    CHECK(a.peak_memory_bytes < b.peak_memory_bytes);  // activations of 2 samples, not 8
  }
}

TEST_CASE("fp32 gradient reduction of fp16 parameters moves twice the bytes", "[cost][precision]") {
  Setup setup;
  setup.training.precision = Precision::mixed;
  setup.workload = make_gpt({"tiny", 2, {256}, 4, 64, 1000, 1, 0.0}, setup.training);
  CHECK(setup.model().gradient_reduce_ratio() == 1.0);
  Setup fp32 = setup;
  fp32.training.gradient_reduce = ReducePrecision::fp32;
  CHECK(fp32.model().gradient_reduce_ratio() == 2.0);
  const double bytes = setup.workload.op(2).parameter_bytes;
  const OptionCost cost = fp32.model().option_cost(2, OperatorChoice::whole(Mode::dp));
  CHECK(cost.communication_s ==
        Approx(setup.cluster.world.time_s(CollectiveKind::all_reduce, 2 * bytes, 4)));
}

TEST_CASE("training reads micro-batch, accumulation and gradient reduction strictly",
          "[scenario][accumulation]") {
  auto load = [](const Json& training) {
    return load_training(JsonReader(training, "t.json", "$.training"));
  };
  const Training t =
      load({{"micro_batch_size", 4}, {"accumulation_steps", 8}, {"gradient_reduce", "fp32"}});
  CHECK(t.min_batch_size == 4);
  CHECK(t.max_batch_size == 4);
  CHECK(t.accumulation_steps == 8);
  CHECK(t.samples_per_rank(4) == 32);
  CHECK(t.gradient_reduce == ReducePrecision::fp32);
  CHECK(load(Json::object()).accumulation_steps == 1);
  auto message = [&](const Json& training) {
    try {
      load(training);
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message({{"accumulation_steps", 0}}),
             Catch::Contains("t.json") && Catch::Contains("$.training.accumulation_steps"));
  CHECK_THAT(message({{"accumulation_steps", "2"}}), Catch::Contains("accumulation_steps"));
  CHECK_THAT(message({{"micro_batch_size", 2}, {"max_batch_size", 4}}),
             Catch::Contains("$.training.max_batch_size") &&
                 Catch::Contains("either micro_batch_size or a batch-size range"));
  CHECK_THAT(message({{"gradient_reduce", "bf16"}}), Catch::Contains("$.training.gradient_reduce"));
  CHECK_THAT(message({{"accumulation", 2}}), Catch::Contains("accumulation_steps"));
}
