// The host floor of a compute law: time per call = max(host_floor, fixed + b x FLOPs / rate),
// read strictly, written back, and applied by the cost model; the GPU's peak bounds the rates.
#include <catch2/catch.hpp>

#include "model/cost_model.hpp"
#include "tests/support/cluster_json.hpp"

using namespace osdp;
using osdp::test::cluster_error;
using osdp::test::load_cluster_json;

namespace {

Json with_gpu(const Json& gpu) {
  Json cluster = Json::parse(R"({"name": "two ranks", "ranks": 2,
    "collective": {"alpha_s": 1e-5, "beta_s_per_byte": 1e-10}})");
  cluster["gpu"] = gpu;
  return cluster;
}

Json with_mlp_forward(const Json& law) {
  Json gpu = Json::parse(R"({"compute": "100TFLOPS"})");
  gpu["operator_compute"]["mlp"]["forward"] = law;
  return with_gpu(gpu);
}

Operator mlp_operator() {
  Operator op;
  op.name = "mlp";
  op.kind = OperatorKind::mlp;
  op.parameter_bytes = op.gradient_bytes = 1e6;
  op.optimizer_bytes = 2e6;
  op.activation_bytes_per_sample = 4e6;
  op.input_activation_bytes_per_sample = 1e6;
  op.output_bytes_per_sample = 1e6;
  op.forward_flops_per_sample = 1e9;
  op.backward_flops_per_sample = 2e9;
  return op;
}

}  // namespace

TEST_CASE("a host floor and a peak rate are read, written back, and absent by default",
          "[model][cluster][floor]") {
  const Cluster cluster = load_cluster_json(with_gpu(Json::parse(R"({
    "compute": "100TFLOPS", "peak_compute": "312TFLOPS",
    "operator_compute": {
      "mlp": {"forward": {"fixed": "0.1ms", "rate": "200TFLOPS", "host_floor": "0.4ms"},
              "backward": {"fixed": "0.2ms", "rate": "200TFLOPS"}}}})")));
  CHECK(*cluster.gpu.peak_flops_per_s == Approx(312e12));
  const OperatorCompute* mlp = cluster.gpu.compute_law("mlp");
  REQUIRE(mlp != nullptr);
  CHECK(mlp->forward.host_floor_s == Approx(4e-4));
  CHECK(mlp->backward.host_floor_s == 0);  // missing: no floor

  const Json written = cluster_to_json(cluster);
  CHECK(written["gpu"]["peak_compute"].get<double>() == Approx(312e12));
  CHECK(written["gpu"]["operator_compute"]["mlp"]["forward"]["host_floor"].get<double>() ==
        Approx(4e-4));
  CHECK_FALSE(written["gpu"]["operator_compute"]["mlp"]["backward"].contains("host_floor"));
  const Cluster again = load_cluster_json(written);
  CHECK(again.gpu.compute_law("mlp")->forward.host_floor_s == Approx(4e-4));
  CHECK(*again.gpu.peak_flops_per_s == Approx(312e12));

  // A cluster without either writes neither key.
  const Json plain = cluster_to_json(load_cluster_json(
      with_gpu(Json::parse(R"({"operator_compute": {"mlp": {"forward": {"fixed": "0.1ms"}}}})"))));
  CHECK_FALSE(plain["gpu"].contains("peak_compute"));
  CHECK_FALSE(plain["gpu"]["operator_compute"]["mlp"]["forward"].contains("host_floor"));
}

TEST_CASE("bad host floors and rates above the peak name the JSON path",
          "[model][cluster][floor]") {
  const std::string path = "$.gpu.operator_compute.mlp.forward.host_floor";
  for (const char* bad :
       {R"({"host_floor": -1e-4})", R"({"host_floor": "-0.1ms"})", R"({"host_floor": "infms"})",
        R"({"host_floor": "nan s"})", R"({"host_floor": 1e308})", R"({"host_floor": "slow"})"}) {
    INFO(bad);
    const std::string message = cluster_error(with_mlp_forward(Json::parse(bad)));
    CHECK(message.find(path) != std::string::npos);
  }
  // Unknown keys beside it are still rejected, with a hint.
  const std::string typo = cluster_error(with_mlp_forward(Json::parse(R"({"host_flor": 1e-4})")));
  CHECK(typo.find("host_floor") != std::string::npos);

  Json gpu = Json::parse(R"({"peak_compute": "312TFLOPS",
    "operator_compute": {"attention": {"backward": {"rate": "640TFLOPS"}}}})");
  const std::string above = cluster_error(with_gpu(gpu));
  CHECK(above.find("$.gpu.operator_compute.attention.backward.rate") != std::string::npos);
  CHECK(above.find("peak") != std::string::npos);
  const std::string sustained = cluster_error(
      with_gpu(Json::parse(R"({"compute": "400TFLOPS", "peak_compute": "312TFLOPS"})")));
  CHECK(sustained.find("$.gpu.compute") != std::string::npos);
  CHECK(
      cluster_error(with_gpu(Json::parse(R"({"peak_compute": -5})"))).find("$.gpu.peak_compute") !=
      std::string::npos);
  // At the peak exactly is allowed.
  gpu["operator_compute"]["attention"]["backward"]["rate"] = "312TFLOPS";
  CHECK(cluster_error(with_gpu(gpu)).empty());
}

TEST_CASE("the cost model takes max(host floor, fixed + b x FLOPs / rate) per call",
          "[model][cost][floor]") {
  Cluster cluster;
  cluster.ranks = 4;
  cluster.gpus_per_node = 4;
  cluster.world = cluster.intra_node = cluster.inter_node = GroupTiming::uniform({5e-6, 1e-10});
  cluster.gpu.memory_bytes = 80e9;
  const double rate = 1e12;
  // Forward law 0.1 ms + b x 1 ms, floor 2 ms; backward 0.2 ms + b x 2 ms, floor 4 ms.
  ComputeLaw forward{1e-4, rate, std::nullopt};
  forward.host_floor_s = 2e-3;
  ComputeLaw backward{2e-4, rate, std::nullopt};
  backward.host_floor_s = 4e-3;
  cluster.gpu.operator_compute["mlp"] = {forward, backward};
  const Workload workload = Workload::chain("one", {mlp_operator()});
  Training training;
  const CostModel model(workload, cluster, training, {CostModelKind::extended, 2});

  for (int b : {1, 2, 3, 4, 8}) {
    INFO("batch " << b);
    CHECK(model.forward_compute_s(0).at(b) == Approx(std::max(2e-3, 1e-4 + b * 1e-3)));
    CHECK(model.backward_compute_s(0).at(b) == Approx(std::max(4e-3, 2e-4 + b * 2e-3)));
    // The linear law itself is unchanged (explain's gamma_i, the per-sample part).
    CHECK(model.forward_compute_s(0).fixed == Approx(1e-4));
    CHECK(model.forward_compute_s(0).per_sample == Approx(1e-3));
    // A checkpointed operator pays the floor on its recompute too.
    const OptionCost cost =
        model.option_cost(0, OperatorChoice::whole(Mode::dp, Checkpoint::unfused));
    const double compute = 2 * std::max(2e-3, 1e-4 + b * 1e-3) + std::max(4e-3, 2e-4 + b * 2e-3);
    CHECK(cost.compute_s.at(b) == Approx(compute));
    // Beside the compute: the (exposed: a lone operator) all-reduce, the optimizer step and the
    // launch gaps of its four kernels (forward, recompute, backward twice).
    CHECK(cost.time_s.at(b) - cost.compute_s.at(b) ==
          Approx(cost.communication_s + model.optimizer_step_s(0, OperatorChoice::whole(Mode::dp)) +
                 4 * cluster.gpu.kernel_launch_s));
    const Plan plan{b, {OperatorChoice::whole(Mode::dp, Checkpoint::unfused)}, 0, {}};
    CHECK(model.plan_cost(plan).compute_s == Approx(compute));
  }

  // Accumulation: every micro-batch pays its floors.
  Training accumulated;
  accumulated.accumulation_steps = 4;
  const CostModel four(workload, cluster, accumulated, {CostModelKind::extended, 2});
  CHECK(four.option_cost(0, OperatorChoice::whole(Mode::dp)).compute_s.at(1) ==
        Approx(4 * (2e-3 + 4e-3)));

  // DESIGN section 1's paper model is b x gamma_i: no fixed part, no floor.
  const CostModel paper(workload, cluster, training, {CostModelKind::paper, 2});
  CHECK(paper.forward_compute_s(0).at(1) == Approx(1e-4 + 1e-3));
  CHECK(paper.option_cost(0, OperatorChoice::whole(Mode::dp)).compute_s.at(1) ==
        Approx(1e-3 + 2e-3));
}

TEST_CASE("floored times compare exactly at every batch", "[model][cost][floor]") {
  // max(5, 1 + b) against 4 + b: below at b < 1 ... the floor bends a piecewise-linear time.
  Linear floored{1.0, 1.0, {{1.0, 5.0, 1.0, 1.0}}};
  CHECK(floored.at(1) == Approx(5.0));
  CHECK(floored.at(4) == Approx(5.0));
  CHECK(floored.at(6) == Approx(7.0));
  Linear sum = floored;
  sum += Linear{2.0, 0.5, {}};
  CHECK(sum.at(2) == Approx(5.0 + 3.0));
  CHECK(sum.at(10) == Approx(11.0 + 7.0));
}
