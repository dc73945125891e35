// The calibrated parts of a cluster's GPU (per-kind compute laws, the optimizer's update
// bandwidth): read strictly, in SI units, and written back as they were read.
#include <catch2/catch.hpp>

#include "model/cluster_json.hpp"
#include "model/scenario.hpp"
#include "tests/support/cluster_json.hpp"

using namespace osdp;
using osdp::test::cluster_error;
using osdp::test::load_cluster_json;

namespace {

Json with_gpu(const Json& gpu) {
  Json cluster = Json::parse(R"({"name": "two cpu ranks", "ranks": 2,
    "collective": {"alpha_s": 1e-4, "beta_s_per_byte": 1e-9}})");
  cluster["gpu"] = gpu;
  return cluster;
}

}  // namespace

TEST_CASE("per-kind compute laws and the update bandwidth are read in SI units",
          "[model][cluster]") {
  const Cluster cluster = load_cluster_json(with_gpu(Json::parse(R"({
    "compute": "70GFLOP/s", "memory_bandwidth": "12GB/s", "optimizer_bandwidth": "9GB/s",
    "straggler_slowdown": 1.1, "blocking_sync": "1.5ms",
    "operator_compute": {
      "mlp": {"forward": {"fixed": "0.25ms", "rate": "80GFLOP/s"},
              "backward": {"fixed": "4ms", "rate": "90GFLOP/s", "extra_slice": "0.5ms"}},
      "embedding": {"backward": {"fixed": "2ms"}}}})")));
  CHECK(cluster.gpu.optimizer_bandwidth_Bps == Approx(9e9));
  CHECK(cluster.gpu.blocking_sync_s == Approx(1.5e-3));
  const OperatorCompute* mlp = cluster.gpu.compute_law("mlp");
  REQUIRE(mlp != nullptr);
  CHECK(mlp->forward.fixed_s == Approx(2.5e-4));
  CHECK(*mlp->forward.flops_per_s == Approx(8e10));
  CHECK(mlp->backward.fixed_s == Approx(4e-3));
  CHECK(*mlp->backward.extra_slice_s == Approx(5e-4));
  CHECK_FALSE(mlp->forward.extra_slice_s);
  const OperatorCompute* embedding = cluster.gpu.compute_law("embedding");
  REQUIRE(embedding != nullptr);
  CHECK(embedding->forward.fixed_s == 0);
  CHECK_FALSE(embedding->backward.flops_per_s);
  CHECK(cluster.gpu.compute_law("attention") == nullptr);

  // Written and read back: the same laws.
  const Cluster again = load_cluster_json(cluster_to_json(cluster));
  CHECK(again.gpu.optimizer_bandwidth_Bps == cluster.gpu.optimizer_bandwidth_Bps);
  CHECK(again.gpu.straggler_slowdown == Approx(1.1));
  CHECK(again.gpu.blocking_sync_s == Approx(1.5e-3));
  REQUIRE(again.gpu.operator_compute.size() == 2);
  CHECK(again.gpu.compute_law("mlp")->backward.fixed_s == Approx(4e-3));
  CHECK(*again.gpu.compute_law("mlp")->backward.flops_per_s == Approx(9e10));
  CHECK(*again.gpu.compute_law("mlp")->backward.extra_slice_s == Approx(5e-4));
  CHECK_FALSE(again.gpu.compute_law("embedding")->forward.flops_per_s);
}

TEST_CASE("bad compute laws name the path and what was expected", "[model][cluster]") {
  const std::string unknown_kind =
      cluster_error(with_gpu(Json::parse(R"({"operator_compute": {"mpl": {}}})")));
  CHECK(unknown_kind.find("$.gpu.operator_compute") != std::string::npos);
  CHECK(unknown_kind.find("mlp") != std::string::npos);  // did you mean
  const std::string negative = cluster_error(
      with_gpu(Json::parse(R"({"operator_compute": {"mlp": {"forward": {"fixed": -1}}}})")));
  CHECK(negative.find("$.gpu.operator_compute.mlp.forward.fixed") != std::string::npos);
  const std::string zero_rate = cluster_error(
      with_gpu(Json::parse(R"({"operator_compute": {"head": {"backward": {"rate": 0}}}})")));
  CHECK(zero_rate.find("$.gpu.operator_compute.head.backward.rate") != std::string::npos);
  const std::string phase =
      cluster_error(with_gpu(Json::parse(R"({"operator_compute": {"head": {"recompute": {}}}})")));
  CHECK(phase.find("recompute") != std::string::npos);
  CHECK(cluster_error(with_gpu(Json::parse(R"({"optimizer_bandwidth": "fast"})")))
            .find("$.gpu.optimizer_bandwidth") != std::string::npos);
  CHECK(cluster_error(with_gpu(Json::parse(R"({"straggler_slowdown": 0.9})")))
            .find("$.gpu.straggler_slowdown") != std::string::npos);
  CHECK(cluster_error(with_gpu(Json::parse(R"({"blocking_sync": "-1ms"})")))
            .find("$.gpu.blocking_sync") != std::string::npos);
}

TEST_CASE("shared host cores are read, written back, and replace the overlap slowdown",
          "[model][cluster]") {
  Json json = with_gpu(Json::parse(R"({"compute": "70GFLOP/s"})"));
  json["host"] = Json::parse(R"({"cores": 2, "ranks_on_cores": true})");
  const Cluster cluster = load_cluster_json(json);
  REQUIRE(cluster.host_cores);
  CHECK(cluster.host_cores->cores == 2);
  const Json written = cluster_to_json(cluster);
  CHECK(written.at("host").at("cores") == 2);
  CHECK_FALSE(written.at("gpu").contains("overlap_slowdown"));
  CHECK(load_cluster_json(written).host_cores->cores == 2);

  CHECK(cluster.host_cores->scheduler_tick_s == 0.0);  // none said: none
  CHECK_FALSE(written.at("host").contains("scheduler_tick"));

  json["host"]["scheduler_tick"] = "4ms";
  const Cluster ticking = load_cluster_json(json);
  CHECK(ticking.host_cores->scheduler_tick_s == Approx(4e-3));
  CHECK(load_cluster_json(cluster_to_json(ticking)).host_cores->scheduler_tick_s == Approx(4e-3));

  CHECK(ticking.host_cores->step_straggling == 1.0);  // none said: even
  CHECK_FALSE(cluster_to_json(ticking).at("host").contains("step_straggling"));
  json["host"]["step_straggling"] = 1.12;
  CHECK(load_cluster_json(cluster_to_json(load_cluster_json(json))).host_cores->step_straggling ==
        Approx(1.12));
  json["host"]["step_straggling"] = 0.9;  // a slowdown: at least 1
  CHECK_THROWS_AS(load_cluster_json(json), InputError);
  json["host"].erase("step_straggling");

  json["host"]["ranks_on_cores"] = false;  // cores said, ranks elsewhere (GPUs): no sharing
  CHECK_FALSE(load_cluster_json(json).host_cores);
  CHECK(cluster_to_json(load_cluster_json(json)).at("gpu").contains("overlap_slowdown"));
}

TEST_CASE("a smaller group's own collective timings are read, written back and checked",
          "[model][cluster]") {
  Json json = with_gpu(Json::parse(R"({"compute": "70GFLOP/s"})"));
  json["ranks"] = 4;
  json["collective_by_group_size"] =
      Json::parse(R"({"2": {"alpha_s": 2e-5, "beta_s_per_byte": 3e-10}})");
  const Cluster cluster = load_cluster_json(json);
  REQUIRE(cluster.timing_by_group_size.size() == 1);
  CHECK(cluster.group_timing(2).all_reduce.alpha_beta.alpha_s == Approx(2e-5));
  CHECK(cluster.group_timing(2).all_gather.alpha_beta.beta_s_per_byte == Approx(3e-10));
  CHECK(cluster.group_timing(4).all_reduce.alpha_beta.alpha_s == Approx(1e-4));  // the world's
  CHECK(cluster.group_timing(3).all_reduce.alpha_beta.alpha_s == Approx(1e-4));  // not listed
  const Cluster again = load_cluster_json(cluster_to_json(cluster));
  CHECK(again.group_timing(2).reduce_scatter.alpha_beta.alpha_s == Approx(2e-5));
  CHECK_FALSE(cluster_to_json(load_cluster_json(with_gpu(Json::object())))
                  .contains("collective_by_group_size"));

  for (const char* size : {"4", "1", "two", "2x"}) {
    Json bad = json;
    bad["collective_by_group_size"] = Json::object();
    bad["collective_by_group_size"][size] = Json::parse(R"({"alpha_s": 1e-5})");
    const std::string message = cluster_error(bad);
    INFO(message);
    CHECK(message.find(std::string("$.collective_by_group_size.") + size) != std::string::npos);
    CHECK(message.find("a group size from 2 to 3") != std::string::npos);
  }
  Json missing_beta = json;
  missing_beta["collective_by_group_size"]["2"] = Json::parse(R"({"all_reduce": {}})");
  CHECK(cluster_error(missing_beta).find("$.collective_by_group_size.2") != std::string::npos);
}
