#include "model/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace osdp {

std::string_view node_kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::pcie:
      return "pcie";
    case NodeKind::nvlink_mesh:
      return "nvlink_mesh";
    case NodeKind::nvswitch:
      return "nvswitch";
  }
  return "?";
}

const OperatorCompute* Gpu::compute_law(std::string_view kind) const {
  const auto it = operator_compute.find(kind);
  return it == operator_compute.end() ? nullptr : &it->second;
}

AlphaBeta CollectiveTiming::at(double step_bytes) const {
  const Segment* chosen = nullptr;
  for (const auto& segment : by_size) {
    if (segment.min_step_bytes <= step_bytes &&
        (chosen == nullptr || segment.min_step_bytes > chosen->min_step_bytes)) {
      chosen = &segment;
    }
  }
  return chosen != nullptr ? chosen->alpha_beta : alpha_beta;
}

GroupTiming GroupTiming::uniform(AlphaBeta alpha_beta) {
  return {{alpha_beta, {}}, {alpha_beta, {}}, {alpha_beta, {}}};
}

const CollectiveTiming& GroupTiming::of(CollectiveKind kind) const {
  switch (kind) {
    case CollectiveKind::all_gather:
      return all_gather;
    case CollectiveKind::reduce_scatter:
      return reduce_scatter;
    case CollectiveKind::all_reduce:
      return all_reduce;
  }
  return all_reduce;
}

double GroupTiming::time_s(CollectiveKind kind, double full_bytes, int ranks) const {
  const double step_bytes = ring_step_bytes(full_bytes, ranks);
  return ring_steps(kind, ranks) * of(kind).at(step_bytes).step_time_s(step_bytes);
}

namespace {

struct RingEdge {
  double latency_s = 0;
  double bandwidth_Bps = std::numeric_limits<double>::infinity();
};

// The slowest edge of a ring: longest latency and narrowest bandwidth (both taken as worst case;
// exact when one edge is worst in both, as in every shipped topology).
struct RingBottleneck {
  double latency_s = 0;
  double bandwidth_Bps = std::numeric_limits<double>::infinity();
  void add(const RingEdge& edge) {
    latency_s = std::max(latency_s, edge.latency_s);
    bandwidth_Bps = std::min(bandwidth_Bps, edge.bandwidth_Bps);
  }
  AlphaBeta alpha_beta() const {
    return {latency_s, std::isfinite(bandwidth_Bps) ? 1.0 / bandwidth_Bps : 0.0};
  }
};

RingBottleneck intra_node_ring(const NodeTopology& node) {
  RingBottleneck ring;
  if (node.gpus <= 1) return ring;
  switch (node.kind) {
    case NodeKind::nvlink_mesh:
      ring.add({node.gpu_link.latency_s, node.gpu_link.bandwidth_Bps});
      break;
    case NodeKind::nvswitch:
      ring.add({2 * node.gpu_link.latency_s, node.gpu_link.bandwidth_Bps});
      break;
    case NodeKind::pcie: {
      const PcieTree& tree = node.pcie;
      const Link& port = tree.gpu_link;
      if (tree.gpus_per_switch > 1) ring.add({2 * port.latency_s, port.bandwidth_Bps});
      const int switches = tree.sockets * tree.switches_per_socket;
      if (switches > 1) {
        // Between switches: port, uplink, (root complex), uplink, port. Each uplink direction
        // carries one ring flow.
        const Link& up = tree.switch_uplink;
        RingEdge across{2 * port.latency_s + 2 * up.latency_s,
                        std::min(port.bandwidth_Bps, up.bandwidth_Bps)};
        if (tree.sockets > 1) {
          across.latency_s += tree.inter_socket.latency_s;
          across.bandwidth_Bps = std::min(across.bandwidth_Bps, tree.inter_socket.bandwidth_Bps);
        }
        ring.add(across);
      }
      break;
    }
  }
  return ring;
}

// Latency from a GPU to its node's NIC: through the node's fabric (one hop on NVLink / NVSwitch
// nodes, GPU port + uplink on PCIe nodes).
double gpu_to_nic_latency_s(const NodeTopology& node) {
  if (node.kind == NodeKind::pcie) {
    return node.pcie.gpu_link.latency_s + node.pcie.switch_uplink.latency_s;
  }
  return node.gpu_link.latency_s;
}

}  // namespace

namespace {

// Half-duplex links (split_duplex false) carry a ring's two directions at once, each at half
// the bandwidth: every tree link (PCIe, NVSwitch, NIC, leaf uplink) is crossed once per
// direction; an NVLink mesh link only when two GPUs form the ring.
Topology with_duplex_sharing(Topology topology) {
  if (topology.split_duplex) return topology;
  auto halve = [](Link& link) { link.bandwidth_Bps /= 2; };
  NodeTopology& node = topology.node;
  halve(topology.nic);
  if (topology.leaf_spine) halve(topology.leaf_spine->uplink);
  halve(node.pcie.gpu_link);
  halve(node.pcie.switch_uplink);
  halve(node.pcie.inter_socket);
  if (node.kind != NodeKind::nvlink_mesh || node.gpus == 2) halve(node.gpu_link);
  return topology;
}

// Of flows leaving a leaf on the given NICs (one per flow), the most that share one spine uplink.
int busiest_spine_flows(const LeafSpine& fabric, const std::vector<int>& nic_of_flow) {
  std::vector<int> flows_on_spine(fabric.spines, 0);
  for (int nic : nic_of_flow) ++flows_on_spine[fabric.spine_of(nic)];
  return *std::max_element(flows_on_spine.begin(), flows_on_spine.end());
}

}  // namespace

DerivedTimings derive_timings(const Topology& physical) {
  const Topology topology = with_duplex_sharing(physical);
  const RingBottleneck intra = intra_node_ring(topology.node);
  DerivedTimings timings;
  timings.intra_node = intra.alpha_beta();
  if (topology.nodes <= 1) {
    timings.world = timings.intra_node;
    return timings;
  }
  // Crossing nodes: GPU -> NIC -> switch -> NIC -> GPU.
  double cross_latency_s = 2 * gpu_to_nic_latency_s(topology.node) + 2 * topology.nic.latency_s;
  // The fabric between a GPU and its node's NICs, and how many of a node's GPUs share each
  // link of it when every GPU talks to a NIC at once (HSDP's cross-node groups).
  const NodeTopology& node = topology.node;
  const PcieTree& tree = node.pcie;
  const bool pcie = node.kind == NodeKind::pcie;
  double to_nic_bandwidth_Bps =
      pcie ? std::min(tree.gpu_link.bandwidth_Bps, tree.switch_uplink.bandwidth_Bps)
           : node.gpu_link.bandwidth_Bps;
  double all_to_nic_bandwidth_Bps =
      pcie ? std::min(tree.gpu_link.bandwidth_Bps,
                      tree.switch_uplink.bandwidth_Bps / tree.gpus_per_switch)
           : node.gpu_link.bandwidth_Bps;
  double inter_latency_s = cross_latency_s;
  // PCIe nodes hold their NICs on the first socket's root complex: the world ring leaves a node
  // from its last socket, crossing the inter-socket links once (it enters on the first socket);
  // a cross-node group of a GPU on the last socket crosses them on both ends.
  if (pcie && tree.sockets > 1) {
    const double hops_latency_s = (tree.sockets - 1) * tree.inter_socket.latency_s;
    cross_latency_s += hops_latency_s;
    inter_latency_s += 2 * hops_latency_s;
    to_nic_bandwidth_Bps = std::min(to_nic_bandwidth_Bps, tree.inter_socket.bandwidth_Bps);
    const double beyond_first_socket =
        (tree.sockets - 1) * tree.switches_per_socket * static_cast<double>(tree.gpus_per_switch);
    all_to_nic_bandwidth_Bps =
        std::min(all_to_nic_bandwidth_Bps, tree.inter_socket.bandwidth_Bps / beyond_first_socket);
  }
  // The world ring is split into one channel per NIC; each crosses every node boundary once.
  const int nics = topology.nics_per_node;
  double world_cross_Bps = std::min(to_nic_bandwidth_Bps, topology.nic.bandwidth_Bps * nics);
  // HSDP's cross-node groups: one per local rank, all running at once over the node's NICs.
  const double shared = static_cast<double>(node.gpus) / nics;
  double inter_Bps =
      std::min(all_to_nic_bandwidth_Bps, topology.nic.bandwidth_Bps / std::max(1.0, shared));
  // Leaf-spine: the rings leave every leaf once, through the spines their NICs select. A world
  // ring edge is as slow as its channel on the busiest spine uplink; the cross-node groups'
  // flows on the busiest uplink share it.
  const std::optional<LeafSpine>& leaf_spine = topology.leaf_spine;
  if (leaf_spine && leaf_spine->leaves(topology.nodes) > 1) {
    const double uplinks_latency_s = 2 * leaf_spine->uplink.latency_s;
    cross_latency_s += uplinks_latency_s;
    inter_latency_s += uplinks_latency_s;
    std::vector<int> world_channels(nics);
    std::iota(world_channels.begin(), world_channels.end(), 0);
    world_cross_Bps =
        std::min(world_cross_Bps, nics * leaf_spine->uplink.bandwidth_Bps /
                                      busiest_spine_flows(*leaf_spine, world_channels));
    std::vector<int> group_nics;  // the NIC of each local rank's group, as the simulator picks
    const int gpus_per_nic = std::max(1, node.gpus / nics);
    for (int local = 0; local < node.gpus; ++local) {
      group_nics.push_back(std::min(nics - 1, local / gpus_per_nic));
    }
    inter_Bps = std::min(
        inter_Bps, leaf_spine->uplink.bandwidth_Bps / busiest_spine_flows(*leaf_spine, group_nics));
  }
  RingBottleneck world = intra;
  world.add({cross_latency_s, world_cross_Bps});
  timings.world = world.alpha_beta();
  RingBottleneck inter;
  inter.add({inter_latency_s, inter_Bps});
  timings.inter_node = inter.alpha_beta();
  return timings;
}

AlphaBeta group_ring_timing(const Topology& physical, int members_per_node, int nodes) {
  const Topology topology = with_duplex_sharing(physical);
  NodeTopology members = topology.node;
  members.gpus = std::max(1, members_per_node);
  RingBottleneck ring = intra_node_ring(members);
  if (nodes <= 1) return ring.alpha_beta();
  double latency_s = 2 * gpu_to_nic_latency_s(topology.node) + 2 * topology.nic.latency_s;
  if (topology.leaf_spine && topology.leaf_spine->leaves(topology.nodes) > 1) {
    latency_s += 2 * topology.leaf_spine->uplink.latency_s;
  }
  const double groups_per_node =
      std::max(1.0, static_cast<double>(topology.node.gpus) / std::max(1, members_per_node));
  const double nic_share_Bps =
      topology.nic.bandwidth_Bps * topology.nics_per_node / groups_per_node;
  const double to_nic_Bps = topology.node.kind == NodeKind::pcie
                                ? std::min(topology.node.pcie.gpu_link.bandwidth_Bps,
                                           topology.node.pcie.switch_uplink.bandwidth_Bps)
                                : topology.node.gpu_link.bandwidth_Bps;
  ring.add({latency_s, std::min(nic_share_Bps, to_nic_Bps)});
  return ring.alpha_beta();
}

AlphaBeta point_to_point_timing(const Topology& topology, bool across_nodes) {
  if (!across_nodes) {
    NodeTopology pair = topology.node;
    pair.gpus = 2;
    return intra_node_ring(pair).alpha_beta();
  }
  return group_ring_timing(topology, 1, 2);
}

std::optional<LeafSpine> read_fabric(const JsonReader& fabric, int nodes) {
  const std::string kind = fabric.choice("kind", {"switch", "leaf_spine"});
  if (kind == "switch") {
    fabric.require_only({"kind"});
    return std::nullopt;
  }
  fabric.require_only({"kind", "nodes_per_leaf", "spines", "uplink"});
  LeafSpine leaf_spine;
  leaf_spine.nodes_per_leaf = static_cast<int>(fabric.integer("nodes_per_leaf", 1, nodes));
  leaf_spine.spines = static_cast<int>(fabric.integer("spines", 1, 1 << 16));
  const JsonReader uplink = fabric.object("uplink");
  uplink.require_only({"bandwidth", "latency"});
  leaf_spine.uplink = {uplink.quantity("bandwidth", units::Dimension::bytes_per_second),
                       uplink.quantity("latency", units::Dimension::seconds, false)};
  return leaf_spine;
}

double core_rate(const Cluster& cluster, int busy_threads) {
  if (!cluster.host_cores || busy_threads <= 0) return 1.0;
  const double cores = cluster.host_cores->cores;
  auto share = [cores](double busy) { return std::min(1.0, cores / busy); };
  return share(busy_threads) / share(cluster.gpus_per_node);
}

double shared_core_overlap_slowdown(const Cluster& cluster) {
  return 1.0 / core_rate(cluster, 2 * cluster.gpus_per_node);
}

double host_copy_s(const Cluster& cluster, double bytes) {
  if (bytes <= 0) return 0.0;
  const HostMemory& host = cluster.host;
  const double gpus = cluster.gpus_per_node;
  // CPU ranks: device and host memory are one; the shard moves into the gather buffer and the
  // reduced chunk out of it as they would without offload, so offload copies nothing more.
  if (cluster.host_cores) return 0.0;
  double bandwidth = host.memory_bandwidth_Bps / gpus;
  double latency_s = host.link.latency_s;
  if (cluster.topology && cluster.topology->node.kind == NodeKind::pcie) {
    const PcieTree& pcie = cluster.topology->node.pcie;
    bandwidth = std::min({bandwidth, pcie.gpu_link.bandwidth_Bps,
                          pcie.switch_uplink.bandwidth_Bps / pcie.gpus_per_switch});
    latency_s = pcie.gpu_link.latency_s + pcie.switch_uplink.latency_s;
  } else {
    bandwidth = std::min(bandwidth, host.link.bandwidth_Bps);
  }
  return latency_s + bytes / bandwidth;
}

}  // namespace osdp
