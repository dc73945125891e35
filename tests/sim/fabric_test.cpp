#include "sim/fabric.hpp"

#include <catch2/catch.hpp>

#include "clusters.hpp"
#include "sim/network.hpp"

using namespace osdp;
using namespace osdp::sim;
using namespace osdp::sim::test;

TEST_CASE("rings follow the topology", "[sim][fabric]") {
  SECTION("two NVSwitch nodes: node by node") {
    const Fabric fabric(*nvswitch_cluster(2, 2).topology);
    std::vector<int> expected(16);
    for (int i = 0; i < 16; ++i) expected[i] = i;
    CHECK(fabric.ring_order() == expected);
  }
  SECTION("an NVLink mesh: a chain over the direct links") {
    const Fabric fabric(*nvlink_mesh_cluster().topology);
    CHECK(fabric.ring_order() == std::vector<int>{0, 1, 2, 3});
    CHECK(fabric.path(0, 3).hops.size() == 1);
  }
  SECTION("a PCIe tree: each uplink crossed once per direction") {
    const Cluster cluster = pcie_cluster(2, 2);
    const Fabric fabric(*cluster.topology);
    CHECK(fabric.ring_order() == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
    std::vector<int> crossings(fabric.links().size() * 2, 0);
    for (int i = 0; i < 8; ++i) {
      for (const Hop& hop : fabric.path(i, (i + 1) % 8).hops) ++crossings[hop.link * 2 + hop.up];
    }
    for (int count : crossings) CHECK(count <= 1);
  }
}

TEST_CASE("leaf-spine fabrics: rings leaf by leaf, static spine per NIC", "[sim][fabric]") {
  const Cluster cluster = leaf_spine_cluster(5, 2, 2, 50e9, 1.5e-6);
  const Topology& topology = *cluster.topology;
  const Fabric fabric(topology);
  std::vector<int> in_order(40);
  for (int i = 0; i < 40; ++i) in_order[i] = i;
  CHECK(fabric.ring_order() == in_order);  // leaves {0, 1}, {2, 3}, {4}: nodes in order
  auto names = [&fabric](const Path& path) {
    std::vector<std::string> result;
    for (const Hop& hop : path.hops) {
      if (!fabric.links()[hop.link].ideal) result.push_back(fabric.links()[hop.link].name);
    }
    return result;
  };
  SECTION("within a leaf: NIC, leaf, NIC") {
    const Path same_leaf = fabric.path_via_nic(7, 8, 1);
    CHECK(names(same_leaf) == std::vector<std::string>{"n0.gpu7-nvswitch", "n0.nic1-leaf0",
                                                       "n1.nic1-leaf0", "n1.gpu0-nvswitch"});
    CHECK(same_leaf.latency_s ==
          Approx(2 * topology.node.gpu_link.latency_s + 2 * topology.nic.latency_s));
  }
  SECTION("across leaves: up and down through spine nic mod spines") {
    const Path nic0 = fabric.path_via_nic(15, 16, 0);
    CHECK(names(nic0) == std::vector<std::string>{"n1.gpu7-nvswitch", "n1.nic0-leaf0",
                                                  "leaf0-spine0", "leaf1-spine0", "n2.nic0-leaf1",
                                                  "n2.gpu0-nvswitch"});
    const Path nic1 = fabric.path_via_nic(39, 0, 1);  // the last leaf back to the first
    CHECK(names(nic1)[2] == "leaf2-spine1");
    CHECK(names(nic1)[3] == "leaf0-spine1");
    CHECK(nic1.latency_s ==
          Approx(2 * topology.node.gpu_link.latency_s + 2 * topology.nic.latency_s + 3e-6));
    // Leaf to spine is the uplink's up direction; spine to leaf its down direction.
    CHECK(nic1.hops[3].up);
    CHECK_FALSE(nic1.hops[4].up);
  }
}

TEST_CASE("routes add up their links' latencies", "[sim][fabric]") {
  const Cluster cluster = pcie_cluster(2, 2);
  const Fabric fabric(*cluster.topology);
  const PcieTree& tree = cluster.topology->node.pcie;
  // Same switch: two ports.
  CHECK(fabric.path(0, 1).latency_s == Approx(2 * tree.gpu_link.latency_s));
  // Across sockets: ports, uplinks and the inter-socket link.
  CHECK(fabric.path(3, 4).latency_s ==
        Approx(2 * tree.gpu_link.latency_s + 2 * tree.switch_uplink.latency_s +
               tree.inter_socket.latency_s));
  SECTION("between nodes, through the chosen NIC") {
    const Cluster two = nvswitch_cluster(2, 2);
    const Fabric nodes(*two.topology);
    const Path path = nodes.path_via_nic(7, 8, 1);
    CHECK(path.latency_s ==
          Approx(2 * two.topology->node.gpu_link.latency_s + 2 * two.topology->nic.latency_s));
    bool through_nic1 = false;
    for (const Hop& hop : path.hops) {
      through_nic1 = through_nic1 || nodes.links()[hop.link].name == "n0.nic1-switch";
    }
    CHECK(through_nic1);
  }
}

TEST_CASE("groups get their channels", "[sim][fabric]") {
  const Cluster cluster = nvswitch_cluster(2, 2);
  std::vector<Group> groups{{GroupKind::world, world_members(cluster)},
                            {GroupKind::inter_node, {3, 11}}};
  const NetworkPlan plan = plan_network(cluster, groups);
  REQUIRE(plan.rings.size() == 2);
  // The world ring splits its two node crossings over both NICs.
  int split_edges = 0;
  for (const RingEdge& edge : plan.rings[0].edges) {
    if (edge.channels.size() == 2) {
      ++split_edges;
      CHECK(edge.channels[0].share + edge.channels[1].share == Approx(1.0));
    }
  }
  CHECK(split_edges == 2);
  // Local rank 3 of 8 with two NICs uses NIC 0.
  for (const RingEdge& edge : plan.rings[1].edges) {
    REQUIRE(edge.channels.size() == 1);
    CHECK(edge.channels[0].from.tag == 0);
  }
  CHECK(plan.rings[0].alpha_s == Approx(cluster.world.all_gather.alpha_beta.alpha_s));
}

TEST_CASE("rings in flight tell which rings slow which", "[sim][fabric]") {
  Cluster cluster = pcie_cluster(1, 2);
  const std::vector<Group> groups{
      {GroupKind::world, {0, 4}}, {GroupKind::world, {1, 5}}, {GroupKind::world, {0, 1}}};
  const NetworkPlan plan = plan_network(cluster, groups);
  const GroupRing& across_a = plan.rings[0];  // both cross the two 12 GB/s switch uplinks
  const GroupRing& across_b = plan.rings[1];
  const GroupRing& under_switch = plan.rings[2];  // GPU 0's and 1's 16 GB/s ports only
  CHECK(across_a.alone_edge_rate_Bps == Approx(12e9));
  CHECK(under_switch.alone_edge_rate_Bps == Approx(16e9));
  RingsInFlight rings(plan);
  rings.begin(across_a);
  rings.begin(across_a);  // the same ring on a second lane loads every link alike
  CHECK_FALSE(rings.slowed_by_others(across_a));
  rings.begin(across_b);  // halves the uplinks for both
  CHECK(rings.slowed_by_others(across_a));
  CHECK(rings.slowed_by_others(across_b));
  rings.end(across_b);
  CHECK_FALSE(rings.slowed_by_others(across_a));
  rings.end(across_a);
  rings.end(across_a);
  rings.begin(under_switch);
  CHECK_FALSE(rings.slowed_by_others(under_switch));
  // GPU 0's ports: a {0, 1} flow (route 2 us) gets 3/4 of 16 GB/s beside a {0, 4} flow (6 us),
  // less than the 16 GB/s it needs; the {0, 4} flow gets 4 GB/s, less than its 12 GB/s.
  rings.begin(across_a);
  CHECK(rings.slowed_by_others(under_switch));
  CHECK(rings.slowed_by_others(across_a));
  rings.end(across_a);
  rings.end(under_switch);
  CHECK_THROWS_AS(rings.end(across_a), std::logic_error);
}

TEST_CASE("a ring that keeps its pace on a shared link slows nobody", "[sim][fabric]") {
  // HSDP on NVSwitch nodes: an intra-node ring and a cross-node ring share GPU 0's NVSwitch
  // link; the cross-node ring is NIC-bound (12.5 GB/s) and loses nothing there, so the
  // intra-node ring, which does get less than its 300 GB/s, contends with nobody.
  const Cluster cluster = nvswitch_cluster(2, 1);
  const std::vector<Group> groups{{GroupKind::intra_node, {0, 1, 2, 3, 4, 5, 6, 7}},
                                  {GroupKind::inter_node, {0, 8}}};
  const NetworkPlan plan = plan_network(cluster, groups);
  RingsInFlight rings(plan);
  rings.begin(plan.rings[0]);
  rings.begin(plan.rings[1]);
  CHECK_FALSE(rings.slowed_by_others(plan.rings[0]));
  CHECK_FALSE(rings.slowed_by_others(plan.rings[1]));
}
