// CPU offload (model/mode's offload descriptions): offloaded states leave the device for the
// host and are counted there, the copies and the CPU's step cost what the cluster's host block
// says, and the host block reads, writes and rejects as every cluster key does.
#include <catch2/catch.hpp>

#include "model/cluster_json.hpp"
#include "model/input_error.hpp"
#include "model/mode.hpp"
#include "model/plan_json.hpp"
#include "model/scenario.hpp"

namespace osdp {
namespace {

Scenario gpt_scenario(const Json& host = Json::object()) {
  Json document = {
      {"name", "offloaded"},
      {"model",
       {{"family", "gpt"},
        {"layers", 4},
        {"hidden", 512},
        {"heads", 8},
        {"sequence_length", 128},
        {"vocabulary", 8192}}},
      {"cluster", "clusters/titan-rtx-8x-pcie3.json"},
      {"training", {{"precision", "fp32"}, {"optimizer", "adam"}, {"memory_limit", "8GiB"}}},
      {"cost_model", "extended"}};
  Scenario scenario =
      scenario_from_json(document, std::string(OSDP_SOURCE_DIR) + "/scenarios/offloaded.json");
  if (!host.empty()) {
    Json cluster = cluster_to_json(scenario.cluster);
    cluster["host"] = host;
    scenario.cluster = load_cluster(JsonReader(cluster, "cluster.json"));
  }
  return scenario;
}

Plan uniform(const Workload& workload, int batch, OperatorChoice choice) {
  Plan plan;
  plan.batch_size = batch;
  plan.choices.assign(workload.size(), choice);
  return plan;
}

}  // namespace

TEST_CASE("offload moves states from device to host and loses none", "[model][offload]") {
  const Cluster cluster = gpt_scenario().cluster;
  const double n = cluster.ranks;
  const double p = 4e6, g = 4e6, o = 8e6;  // fp32 + Adam bytes of one slice
  for (const Mode mode : {Mode::zdp, Mode::z2, Mode::z1}) {
    INFO("mode " << mode_name(mode));
    REQUIRE(describe_mode(mode).offload);
    const double kept = resting_state_bytes(mode, cluster, p, g, o);
    const double device = resting_state_bytes(mode, cluster, p, g, o, true);
    const double host = host_state_bytes(mode, cluster, p, g, o);
    CHECK(device < kept);
    // The optimizer-state shard always moves; Z1 keeps its whole gradient on the device and
    // gives the host a copy of its shard to update.
    const double copied_gradient = mode == Mode::z1 ? g / n : 0.0;
    CHECK(device + host == Approx(kept + copied_gradient));
  }
  CHECK(resting_state_bytes(Mode::zdp, cluster, p, g, o, true) == 0.0);  // FSDP CPUOffload
  CHECK(host_state_bytes(Mode::dp, cluster, p, g, o) == 0.0);
  CHECK_FALSE(describe_mode(Mode::dp).offload);
  CHECK_FALSE(choice_consistent(OperatorChoice::whole(Mode::dp, Checkpoint::none, true)));
}

TEST_CASE("an offloaded plan: device memory down, host memory, copies and a CPU step",
          "[model][offload]") {
  const Scenario scenario = gpt_scenario();
  const CostModel model = scenario.cost_model();
  const Workload& gpt = *scenario.workload;
  const int b = 4;
  const PlanCost fsdp = model.plan_cost(uniform(gpt, b, OperatorChoice::whole(Mode::zdp)));
  const PlanCost offloaded =
      model.plan_cost(uniform(gpt, b, OperatorChoice::whole(Mode::zdp, Checkpoint::none, true)));
  CHECK(offloaded.peak_memory_bytes < fsdp.peak_memory_bytes);
  CHECK(fsdp.peak_memory_bytes - offloaded.peak_memory_bytes ==
        Approx(gpt.model_state_bytes() / scenario.cluster.ranks).epsilon(1e-6));
  // Every rank of the node keeps its shards on the one host.
  CHECK(offloaded.host_memory_bytes ==
        Approx(gpt.model_state_bytes() / scenario.cluster.ranks * scenario.cluster.gpus_per_node)
            .epsilon(1e-9));
  CHECK(fsdp.host_memory_bytes == 0.0);
  // Copies: the parameter shard before each of the 2 gathers, the gradient shard after the
  // reduce-scatter, each op's own.
  double copies_s = 0;
  for (const Operator& op : gpt.operators()) {
    const double shard = op.parameter_bytes / scenario.cluster.ranks;
    copies_s += 3 * host_copy_s(scenario.cluster, shard);
  }
  CHECK(offloaded.host_copy_s == Approx(copies_s).epsilon(1e-9));
  // The CPU's step: read and write each offloaded byte once, the node's ranks sharing it.
  CHECK(offloaded.host_optimizer_step_s ==
        Approx(2.0 * offloaded.host_memory_bytes / scenario.cluster.host.optimizer_bandwidth_Bps)
            .epsilon(1e-9));
  CHECK(offloaded.iteration_time_s > fsdp.iteration_time_s);
  // An unfused recompute gathers again, so copies again.
  const PlanCost recomputed =
      model.plan_cost(uniform(gpt, b, OperatorChoice::whole(Mode::zdp, Checkpoint::unfused, true)));
  CHECK(recomputed.host_copy_s == Approx(copies_s * 4.0 / 3.0).epsilon(1e-9));
}

TEST_CASE("ZeRO-Offload: the gradient shard out, the updated parameters back, once",
          "[model][offload]") {
  const Scenario scenario = gpt_scenario();
  const CostModel model = scenario.cost_model();
  const Workload& gpt = *scenario.workload;
  const PlanCost z2 =
      model.plan_cost(uniform(gpt, 4, OperatorChoice::whole(Mode::z2, Checkpoint::none, true)));
  double copies_s = 0;
  for (const Operator& op : gpt.operators()) {
    copies_s += 2 * host_copy_s(scenario.cluster, op.parameter_bytes / scenario.cluster.ranks);
  }
  CHECK(z2.host_copy_s == Approx(copies_s).epsilon(1e-9));
}

TEST_CASE("a PCIe tree's copies share the switch uplink", "[model][offload]") {
  const Cluster cluster = gpt_scenario().cluster;
  REQUIRE(cluster.topology);
  REQUIRE(cluster.topology->node.kind == NodeKind::pcie);
  const PcieTree& pcie = cluster.topology->node.pcie;
  const double bytes = 64e6;
  const double bandwidth = std::min({pcie.gpu_link.bandwidth_Bps,
                                     pcie.switch_uplink.bandwidth_Bps / pcie.gpus_per_switch,
                                     cluster.host.memory_bandwidth_Bps / cluster.gpus_per_node});
  CHECK(host_copy_s(cluster, bytes) ==
        Approx(pcie.gpu_link.latency_s + pcie.switch_uplink.latency_s + bytes / bandwidth));
  CHECK(host_copy_s(cluster, 0) == 0.0);
}

TEST_CASE("the host block: read, written back, and checked", "[model][offload]") {
  const Json host = {{"memory", "512GiB"},
                     {"memory_bandwidth", "80GB/s"},
                     {"optimizer_bandwidth", "20GB/s"},
                     {"link", {{"bandwidth", "12GB/s"}, {"latency", "5us"}}}};
  const Scenario scenario = gpt_scenario(host);
  const HostMemory& read = scenario.cluster.host;
  CHECK(*read.memory_bytes == Approx(512.0 * (1ull << 30)));
  CHECK(read.memory_bandwidth_Bps == Approx(80e9));
  CHECK(read.optimizer_bandwidth_Bps == Approx(20e9));
  CHECK(read.link.bandwidth_Bps == Approx(12e9));
  const Cluster again = load_cluster(JsonReader(cluster_to_json(scenario.cluster), "again.json"));
  CHECK(*again.host.memory_bytes == *read.memory_bytes);
  CHECK(again.host.optimizer_bandwidth_Bps == read.optimizer_bandwidth_Bps);
  // A plan's host memory against the host's.
  const CostModel model = scenario.cost_model();
  CHECK(model.host_memory_fits(511.0 * (1ull << 30)));
  CHECK_FALSE(model.host_memory_fits(513.0 * (1ull << 30)));
  // Bad values name the key.
  Json bad = host;
  bad["memory_bandwidth"] = "fast";
  CHECK_THROWS_AS(gpt_scenario(bad), InputError);
  bad = host;
  bad["optimiser_bandwidth"] = "1GB/s";
  CHECK_THROWS_WITH(gpt_scenario(bad), Catch::Contains("optimizer_bandwidth"));
}

TEST_CASE("plans record offload and read it back", "[model][offload]") {
  const Scenario scenario = gpt_scenario();
  const CostModel model = scenario.cost_model();
  Plan plan = uniform(*scenario.workload, 2, OperatorChoice::whole(Mode::zdp));
  plan.choices[1].offload = true;
  const Json json = plan_to_json(plan, *scenario.workload);
  CHECK(json["operators"][1]["offload"] == true);
  CHECK_FALSE(json["operators"][0].contains("offload"));
  const Plan read = load_plan(JsonReader(json, "plan.json"), *scenario.workload, model);
  CHECK(read.choices == plan.choices);
  // DP has nothing to offload.
  Json bad = json;
  bad["operators"][0]["mode"] = "dp";
  bad["operators"][0]["offload"] = true;
  CHECK_THROWS_WITH(load_plan(JsonReader(bad, "plan.json"), *scenario.workload, model),
                    Catch::Contains("offload"));
  CHECK(describe(OperatorChoice::whole(Mode::z2, Checkpoint::none, true)) == "z2+offload");
}

}  // namespace osdp
