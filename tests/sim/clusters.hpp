// Clusters built in code for the simulator tests.
#pragma once

#include "model/cluster.hpp"

namespace osdp::sim::test {

inline Cluster with_topology(const Topology& topology) {
  Cluster cluster;
  cluster.topology = topology;
  cluster.ranks = topology.ranks();
  cluster.gpus_per_node = topology.node.gpus;
  derive_group_timings(cluster);
  return cluster;
}

// The same cluster with `"collectives": "nccl"`.
inline Cluster with_nccl(Cluster cluster) {
  cluster.collectives = CollectiveLibrary::nccl;
  derive_group_timings(cluster);
  return cluster;
}

// 8 GPUs, two PCIe switches under one socket, uplinks narrower than the GPU ports.
inline Cluster pcie_cluster(int sockets = 1, int switches_per_socket = 2, int nodes = 1,
                            int nics_per_node = 1) {
  Topology topology;
  topology.nodes = nodes;
  topology.nics_per_node = nics_per_node;
  topology.nic = {12.5e9, 5e-6};
  topology.node.kind = NodeKind::pcie;
  topology.node.gpus = 8;
  PcieTree& tree = topology.node.pcie;
  tree.sockets = sockets;
  tree.switches_per_socket = switches_per_socket;
  tree.gpus_per_switch = 8 / (sockets * switches_per_socket);
  tree.gpu_link = {16e9, 1e-6};
  tree.switch_uplink = {12e9, 2e-6};
  tree.inter_socket = {10e9, 3e-6};
  topology.node.gpu_link = tree.gpu_link;
  return with_topology(topology);
}

inline Cluster nvlink_mesh_cluster() {
  Topology topology;
  topology.node.kind = NodeKind::nvlink_mesh;
  topology.node.gpus = 4;
  topology.node.gpu_link = {50e9, 0.7e-6};
  return with_topology(topology);
}

inline Cluster nvswitch_cluster(int nodes = 1, int nics_per_node = 1) {
  Topology topology;
  topology.node.kind = NodeKind::nvswitch;
  topology.node.gpus = 8;
  topology.node.gpu_link = {300e9, 1e-6};
  topology.nodes = nodes;
  topology.nics_per_node = nics_per_node;
  topology.nic = {12.5e9, 5e-6};
  return with_topology(topology);
}

// NVSwitch nodes with two NICs each on leaf switches: `nodes_per_leaf` nodes per leaf, every leaf
// with one uplink of `uplink_Bps` to each of `spines` spines.
inline Cluster leaf_spine_cluster(int nodes, int nodes_per_leaf, int spines, double uplink_Bps,
                                  double uplink_latency_s = 1e-6) {
  Topology topology = *nvswitch_cluster(nodes, 2).topology;
  topology.leaf_spine = LeafSpine{nodes_per_leaf, spines, {uplink_Bps, uplink_latency_s}};
  return with_topology(topology);
}

// The paper form: ranks and alpha-beta, no topology.
inline Cluster logical_cluster(int ranks, double alpha_s, double beta_s_per_byte) {
  Cluster cluster;
  cluster.ranks = ranks;
  cluster.gpus_per_node = ranks;
  cluster.world = GroupTiming::uniform({alpha_s, beta_s_per_byte});
  cluster.intra_node = cluster.world;
  cluster.inter_node = cluster.world;
  return cluster;
}

}  // namespace osdp::sim::test
