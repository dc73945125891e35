// The leaf-spine fabric of a multi-node cluster: read strictly from the cluster JSON, and the
// ring timings derived from it (the busiest spine uplink bounds the rings crossing leaves).
#include <catch2/catch.hpp>
#include <cmath>

#include "model/scenario.hpp"
#include "tests/support/cluster_json.hpp"

using namespace osdp;
using osdp::test::cluster_error;
using osdp::test::load_cluster_json;

namespace {

// 4 nodes of 8 NVSwitch GPUs, two 100 Gb/s NICs each; `fabric` goes into the topology.
Json four_nodes(const Json& fabric) {
  Json cluster = Json::parse(R"({
    "name": "four nodes",
    "topology": {
      "kind": "nvswitch", "nodes": 4, "gpus_per_node": 8,
      "gpu_link": {"bandwidth": "300GBps", "latency": "1us"},
      "nics_per_node": 2, "nic": {"bandwidth": "100Gbps", "latency": "5us"}
    }
  })");
  if (!fabric.is_null()) cluster["topology"]["fabric"] = fabric;
  return cluster;
}

}  // namespace

TEST_CASE("a leaf-spine fabric is read in SI units", "[model][cluster]") {
  const Cluster cluster = load_cluster_json(four_nodes(Json::parse(R"({
    "kind": "leaf_spine", "nodes_per_leaf": 2, "spines": 1,
    "uplink": {"bandwidth": "50Gbps", "latency": "1us"}})")));
  REQUIRE(cluster.topology->leaf_spine);
  const LeafSpine& fabric = *cluster.topology->leaf_spine;
  CHECK(fabric.nodes_per_leaf == 2);
  CHECK(fabric.spines == 1);
  CHECK(fabric.uplink.bandwidth_Bps == Approx(6.25e9));
  CHECK(fabric.uplink.latency_s == Approx(1e-6));
  CHECK(fabric.leaves(4) == 2);
  CHECK(fabric.leaves(5) == 3);
}

TEST_CASE("the busiest spine uplink bounds the rings that cross leaves", "[model][cluster]") {
  SECTION("one spine: both NIC channels of the world ring share its uplink") {
    const Cluster cluster = load_cluster_json(four_nodes(Json::parse(R"({
      "kind": "leaf_spine", "nodes_per_leaf": 2, "spines": 1,
      "uplink": {"bandwidth": "50Gbps", "latency": "1us"}})")));
    // A step costs the ring's mean hop latency: 4 x 7 NVSwitch hops (GPU link twice, 2 us),
    // 2 hops to a node on the same leaf (GPU link, NIC, NIC, GPU link: 12 us) and 2 to the
    // other leaf (and its two uplinks: 14 us), over 32 hops.
    CHECK(cluster.world.all_gather.alpha_beta.alpha_s ==
          Approx((4 * 7 * 2e-6 + 2 * 12e-6 + 2 * 14e-6) / 32));
    // min(GPU link 300 GB/s, 2 NICs x 12.5 GB/s, 2 channels x 6.25 GB/s / 2 on the uplink).
    CHECK(cluster.world.all_gather.alpha_beta.beta_s_per_byte == Approx(1 / 6.25e9));
    // The 8 cross-node groups (4 per NIC) all leave through the one spine.
    CHECK(cluster.inter_node.all_reduce.alpha_beta.beta_s_per_byte == Approx(8 / 6.25e9));
    // One GPU a node: 2 hops within a leaf, 2 across.
    CHECK(cluster.inter_node.all_reduce.alpha_beta.alpha_s == Approx((2 * 12e-6 + 2 * 14e-6) / 4));
    CHECK(cluster.intra_node.all_gather.alpha_beta.beta_s_per_byte == Approx(1 / 300e9));
  }
  SECTION("two spines of wide uplinks: the NICs stay the bottleneck") {
    const Cluster cluster = load_cluster_json(four_nodes(Json::parse(R"({
      "kind": "leaf_spine", "nodes_per_leaf": 2, "spines": 2,
      "uplink": {"bandwidth": "400Gbps", "latency": "1us"}})")));
    CHECK(cluster.world.all_gather.alpha_beta.beta_s_per_byte == Approx(1 / 25e9));
    CHECK(cluster.inter_node.all_reduce.alpha_beta.beta_s_per_byte == Approx(4 / 12.5e9));
  }
  SECTION("one leaf holds every node: no uplink on any route") {
    const Cluster cluster = load_cluster_json(four_nodes(Json::parse(R"({
      "kind": "leaf_spine", "nodes_per_leaf": 4, "spines": 1,
      "uplink": {"bandwidth": "1Gbps", "latency": "1ms"}})")));
    const Cluster switched = load_cluster_json(four_nodes(Json::parse(R"({"kind": "switch"})")));
    CHECK(cluster.world.all_gather.alpha_beta.alpha_s ==
          switched.world.all_gather.alpha_beta.alpha_s);
    CHECK(cluster.world.all_gather.alpha_beta.beta_s_per_byte ==
          switched.world.all_gather.alpha_beta.beta_s_per_byte);
  }
  SECTION("no fabric is one network switch") {
    const Cluster plain = load_cluster_json(four_nodes(Json()));
    CHECK_FALSE(plain.topology->leaf_spine);
    CHECK(plain.world.all_gather.alpha_beta.alpha_s == Approx((4 * 7 * 2e-6 + 4 * 12e-6) / 32));
    CHECK(plain.world.all_gather.alpha_beta.beta_s_per_byte == Approx(1 / 25e9));
  }
}

TEST_CASE("bad fabrics are input errors that name the key and the value", "[model][cluster]") {
  const Json good = Json::parse(R"({
    "kind": "leaf_spine", "nodes_per_leaf": 2, "spines": 2,
    "uplink": {"bandwidth": "400Gbps", "latency": "1us"}})");
  auto with = [&good](const std::string& key, const Json& value) {
    Json fabric = good;
    if (value.is_null()) {
      fabric.erase(key);
    } else {
      fabric[key] = value;
    }
    return four_nodes(fabric);
  };
  const std::string at = "cluster.json: $.topology.fabric";
  SECTION("an unknown key, with the nearest known one") {
    Json fabric = good;
    fabric["spine"] = 4;
    const std::string message = cluster_error(four_nodes(fabric));
    CHECK(message.rfind(at + ".spine", 0) == 0);
    CHECK_THAT(message, Catch::Contains("did you mean \"spines\""));
  }
  SECTION("an unknown kind") {
    const std::string message = cluster_error(with("kind", "fat_tree"));
    CHECK(message.rfind(at + ".kind: got \"fat_tree\"", 0) == 0);
    CHECK_THAT(message, Catch::Contains("\"leaf_spine\""));
  }
  SECTION("nodes per leaf out of range") {
    CHECK_THAT(cluster_error(with("nodes_per_leaf", 0)),
               Catch::StartsWith(at + ".nodes_per_leaf: got 0: expected an integer from 1 to 4"));
    CHECK_THAT(cluster_error(with("nodes_per_leaf", 5)), Catch::Contains("from 1 to 4"));
  }
  SECTION("spines missing or not an integer") {
    CHECK_THAT(cluster_error(with("spines", nullptr)), Catch::StartsWith(at + ".spines"));
    CHECK_THAT(cluster_error(with("spines", 1.5)), Catch::StartsWith(at + ".spines: got 1.5"));
  }
  SECTION("an uplink without a bandwidth or with a bad one") {
    CHECK_THAT(cluster_error(with("uplink", Json::parse(R"({"latency": "1us"})"))),
               Catch::StartsWith(at + ".uplink.bandwidth"));
    CHECK_THAT(cluster_error(with("uplink", Json::parse(R"({"bandwidth": "fast", "latency": 0})"))),
               Catch::StartsWith(at + ".uplink.bandwidth: got \"fast\""));
    CHECK_THAT(
        cluster_error(with("uplink", Json::parse(R"({"bandwidth": "0Gbps", "latency": 0})"))),
        Catch::Contains("above zero"));
  }
  SECTION("a switch takes no other keys") {
    CHECK_THAT(cluster_error(four_nodes(Json::parse(R"({"kind": "switch", "spines": 2})"))),
               Catch::StartsWith(at + ".spines"));
  }
  SECTION("a fabric on a single node") {
    Json cluster = four_nodes(good);
    cluster["topology"]["nodes"] = 1;
    CHECK_THAT(cluster_error(cluster), Catch::StartsWith("cluster.json: $.topology.fabric"));
    CHECK_THAT(cluster_error(cluster), Catch::Contains("nodes > 1"));
  }
}

TEST_CASE("a ring pays each hop's latency once a lap, not its slowest hop's every step",
          "[model][cluster]") {
  // 64 servers of 8 NVSwitch GPUs: a 512-GPU ring crosses 448 NVSwitch hops (GPU link twice,
  // 2 us) and 64 network hops (GPU link, NIC, NIC, GPU link: 12 us) a lap, as NCCL's rings
  // pipeline each step's chunks hop by hop.
  Json json = four_nodes(Json());
  json["topology"]["nodes"] = 64;
  const Cluster cluster = load_cluster_json(json);
  const double step_latency_s = (448 * 2e-6 + 64 * 12e-6) / 512;
  CHECK(cluster.world.all_gather.alpha_beta.alpha_s == Approx(step_latency_s));
  const double all_gather_latency_s =
      ring_time_s(CollectiveKind::all_gather, 0.0, 512, cluster.world.all_gather.alpha_beta);
  CHECK(all_gather_latency_s == Approx(511 * step_latency_s));
  CHECK(all_gather_latency_s < 2e-3);  // 511 steps at the network hop's 12 us: 6.1 ms
  // The same through the layout's groups: one rank a server (every hop crosses the network),
  // and tensor-parallel groups inside a server (every hop on NVSwitch).
  CHECK(group_ring_timing(*cluster.topology, 1, 64).alpha_s == Approx(12e-6));
  CHECK(group_ring_timing(*cluster.topology, 8, 1).alpha_s == Approx(2e-6));
  CHECK(group_ring_timing(*cluster.topology, 8, 64).alpha_s == Approx(step_latency_s));
}

namespace {

// 8 GPUs on a PCIe tree: 2 sockets x 2 switches x 2 GPUs, GPU ports 16 GB/s, switch uplinks
// 12 GB/s, the socket link 10 GB/s (the TITAN RTX server's shape).
Topology pcie_tree(bool split_duplex = true) {
  Topology topology;
  topology.node.kind = NodeKind::pcie;
  topology.node.gpus = 8;
  topology.node.pcie = {2, 2, 2, {16e9, 1e-6}, {12e9, 1e-6}, {10e9, 2e-6}};
  topology.split_duplex = split_duplex;
  return topology;
}

}  // namespace

TEST_CASE("rings that run at once share a PCIe tree's uplinks and socket link",
          "[model][cluster]") {
  const Topology tree = pcie_tree();
  // Alone, a ring over two switches of a socket is as fast as the narrower of port and uplink.
  CHECK(shared_ring_bandwidth_Bps(tree, {{0, 2}}, 0, true) == Approx(12e9));
  // Two such rings (the data-parallel groups of tensor ranks 0 and 1) cross each uplink twice in
  // each direction: half of it each.
  CHECK(shared_ring_bandwidth_Bps(tree, {{0, 2}, {1, 3}}, 1, true) == Approx(6e9));
  // Rings inside a switch cross only their GPUs' ports.
  CHECK(shared_ring_bandwidth_Bps(tree, {{0, 1}, {2, 3}, {4, 5}, {6, 7}}, 2, true) == Approx(16e9));
  // Four rings across the sockets: the socket link carries four edges each way.
  CHECK(shared_ring_bandwidth_Bps(tree, {{0, 4}, {1, 5}, {2, 6}, {3, 7}}, 0, true) ==
        Approx(10e9 / 4));
  // A ring that leaves through the NICs has no closing edge inside the node: 0 -> 4 alone.
  CHECK(shared_ring_bandwidth_Bps(tree, {{0, 4}, {1, 5}}, 0, false) == Approx(10e9 / 2));
  // Half duplex: a ring's two directions share each link.
  CHECK(shared_ring_bandwidth_Bps(pcie_tree(false), {{0, 2}}, 0, true) == Approx(6e9));
  // NVSwitch: every GPU has its own link; nothing shared.
  Topology nvswitch = tree;
  nvswitch.node.kind = NodeKind::nvswitch;
  CHECK(std::isinf(shared_ring_bandwidth_Bps(nvswitch, {{0, 2}, {1, 3}}, 0, true)));
}
