// The cluster's interconnect as a graph (Boost.Graph): GPUs, PCIe switches, CPU root complexes,
// NVSwitches, NICs and the network switch (or leaf and spine switches) as vertices, links as
// edges. The ring order and the
// route of every ring flow are searched on it; the SimGrid platform is built from it.
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <string>
#include <vector>

#include "model/cluster.hpp"

namespace osdp::sim {

enum class VertexKind {
  gpu,
  pcie_switch,
  cpu,
  nvswitch,
  bridge,
  nic,
  network_switch,
  leaf_switch,
  spine_switch
};

struct FabricVertex {
  VertexKind kind = VertexKind::gpu;
  int node = 0;
  int index = 0;  // rank for GPUs, NIC index within its node for NICs, leaf / spine index
};

struct FabricEdge {
  int id = 0;  // index into Fabric::links()
};

// A physical link. `ideal` links (a NIC on its node's fabric) add neither latency nor a limit.
struct FabricLink {
  std::string name;
  int from = 0;  // vertex; traversing from -> to is the link's "up" direction
  int to = 0;
  Link link;
  bool ideal = false;
};

struct Hop {
  int link = 0;
  bool up = true;
};

struct Path {
  std::vector<Hop> hops;
  double latency_s = 0;
};

using FabricGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, FabricVertex, FabricEdge>;

class Fabric {
 public:
  explicit Fabric(const Topology& topology);

  const Topology& topology() const { return topology_; }
  const FabricGraph& graph() const { return graph_; }
  const std::vector<FabricLink>& links() const { return links_; }
  int ranks() const { return topology_.ranks(); }

  // All GPUs in ring order: depth-first over the graph, so that ring neighbours sit on the
  // fastest links and each tree link is crossed once per direction (as NCCL lays rings).
  const std::vector<int>& ring_order() const { return ring_order_; }

  // Lowest-latency route between two GPUs (fewest hops on ties).
  Path path(int from_rank, int to_rank) const;
  // Route between GPUs of different nodes leaving and entering through NIC `nic` of each node
  // (and, between leaves, through spine `nic` mod spines).
  Path path_via_nic(int from_rank, int to_rank, int nic) const;
  int node_of(int rank) const { return rank / topology_.node.gpus; }
  // A PCIe tree's route from a GPU to the root complex (CPU) of its socket, where its host
  // memory hangs: the GPU link and the switch uplink. Throws for other node kinds.
  Path path_to_cpu(int rank) const;

 private:
  int add_vertex(VertexKind kind, int node, int index);
  void add_link(std::string name, int from, int to, Link link, bool ideal = false);
  Path shortest(int from_vertex, int to_vertex) const;
  void append(Path& path, const Path& more) const;

  Topology topology_;
  FabricGraph graph_;
  std::vector<FabricLink> links_;
  std::vector<int> gpu_vertex_;
  std::vector<std::vector<int>> nic_vertex_;  // [node][nic]
  std::vector<std::vector<int>> cpu_vertex_;  // [node][socket], PCIe trees
  std::vector<int> nic_link_;             // link id of NIC (node * nics + nic) to its (leaf) switch
  std::vector<std::vector<int>> uplink_;  // [leaf][spine]: link id, leaf -> spine is "up"
  std::vector<int> ring_order_;
};

}  // namespace osdp::sim
