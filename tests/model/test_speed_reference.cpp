// The speed reference a calibration leaves in its cluster (one probe's compute then), read
// strictly and written back, and the rescaling `osdp validate` applies when the machine's speed
// has moved since: every compute figure of the cost model scales by the factor, nothing else.
#include <catch2/catch.hpp>

#include "model/cluster_json.hpp"
#include "model/cost_model.hpp"
#include "model/workload.hpp"
#include "tests/support/cluster_json.hpp"

using namespace osdp;
using osdp::test::cluster_error;
using osdp::test::load_cluster_json;

namespace {

Json with_reference(const Json& reference) {
  Json cluster = Json::parse(R"({"name": "two cpu ranks", "ranks": 2,
    "collective": {"alpha_s": 1e-4, "beta_s_per_byte": 1e-9}, "gpu": {"compute": "50GFLOP/s"}})");
  cluster["gpu"]["speed_reference"] = reference;
  return cluster;
}

const char* const kReference = R"({"probe": {"layers": 2, "hidden": 320, "heads": 4,
  "sequence_length": 128, "vocabulary": 2048}, "batch_size": 4, "compute": "21.5ms"})";

}  // namespace

TEST_CASE("a speed reference is read in SI units and written back", "[model][cluster][speed]") {
  const Cluster cluster = load_cluster_json(with_reference(Json::parse(kReference)));
  REQUIRE(cluster.gpu.speed_reference);
  CHECK(cluster.gpu.speed_reference->probe.hidden == 320);
  CHECK(cluster.gpu.speed_reference->probe.sequence_length == 128);
  CHECK(cluster.gpu.speed_reference->batch_size == 4);
  CHECK(cluster.gpu.speed_reference->compute_s == Approx(0.0215));
  const Cluster again = load_cluster_json(cluster_to_json(cluster));
  REQUIRE(again.gpu.speed_reference);
  CHECK(again.gpu.speed_reference->probe.vocabulary == 2048);
  CHECK(again.gpu.speed_reference->compute_s == Approx(0.0215));
  // None given, none written.
  Json plain = with_reference(Json());
  plain["gpu"].erase("speed_reference");
  CHECK_FALSE(cluster_to_json(load_cluster_json(plain))["gpu"].contains("speed_reference"));
}

TEST_CASE("bad speed references name the JSON path", "[model][cluster][speed]") {
  const std::vector<std::pair<std::string, Json>> cases{
      {"compute", "0s"}, {"compute", "fast"}, {"compute", -1},
      {"batch_size", 0}, {"batch_size", 2.5}, {"unknown", 1},
  };
  for (const auto& [key, value] : cases) {
    Json reference = Json::parse(kReference);
    reference[key] = value;
    INFO(key << " = " << value.dump());
    CHECK(cluster_error(with_reference(reference)).find("$.gpu.speed_reference") !=
          std::string::npos);
  }
  Json no_hidden = Json::parse(kReference);
  no_hidden["probe"].erase("hidden");
  CHECK(cluster_error(with_reference(no_hidden)).find("$.gpu.speed_reference.probe") !=
        std::string::npos);
}

TEST_CASE("rescaling the compute time scales every operator's compute and nothing else",
          "[model][cost][speed]") {
  Cluster cluster;
  cluster.ranks = 2;
  cluster.gpus_per_node = 2;
  cluster.world = cluster.intra_node = cluster.inter_node = GroupTiming::uniform({5e-6, 1e-10});
  cluster.gpu.memory_bytes = 8e9;
  cluster.gpu.compute_flops_per_s = 4e10;  // the embedding and head: no law of their own
  ComputeLaw forward{2e-4, 5e10, 3e-5};
  forward.activation_bytes_per_s = 8e9;
  forward.host_floor_s = 1e-4;
  ComputeLaw backward{5e-4, 6e10, 6e-5};
  backward.activation_bytes_per_s = 6e9;
  cluster.gpu.operator_compute["mlp"] = {forward, backward};
  ComputeLaw attention{1e-4, 3e10, std::nullopt};
  attention.score_flops_per_s = 2e10;
  attention.score_row_s = 1e-9;
  cluster.gpu.operator_compute["attention"] = {attention, attention};

  const Workload workload = make_gpt({"tiny", 2, {256}, 4, 64, 1000, 1, 0.0}, Training{});
  const CostModel model(workload, cluster, Training{}, {CostModelKind::extended, 2});
  for (double factor : {0.8, 1.25}) {
    Cluster slower = cluster;
    slower.gpu = with_compute_time_scaled(cluster.gpu, factor);
    const CostModel scaled(workload, slower, Training{}, {CostModelKind::extended, 2});
    for (int op = 0; op < workload.size(); ++op) {
      for (int b : {1, 3, 8}) {
        INFO("factor " << factor << ", operator " << op << ", batch " << b);
        CHECK(scaled.forward_compute_s(op).at(b) ==
              Approx(factor * model.forward_compute_s(op).at(b)));
        CHECK(scaled.backward_compute_s(op).at(b) ==
              Approx(factor * model.backward_compute_s(op).at(b)));
      }
    }
    // Memory, collectives and the optimizer are not compute: unchanged.
    CHECK(slower.gpu.memory_bytes == cluster.gpu.memory_bytes);
    CHECK(slower.gpu.kernel_launch_s == cluster.gpu.kernel_launch_s);
    CHECK(slower.gpu.optimizer_bandwidth_Bps == cluster.gpu.optimizer_bandwidth_Bps);
  }
}
