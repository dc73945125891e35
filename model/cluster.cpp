#include "model/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
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
  return {{alpha_beta, {}}, {alpha_beta, {}}, {alpha_beta, {}}, std::nullopt};
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
  return choice(kind, full_bytes, ranks).time_s;
}

CollectiveChoice GroupTiming::choice(CollectiveKind kind, double full_bytes, int ranks) const {
  const double step_bytes = ring_step_bytes(full_bytes, ranks);
  const AlphaBeta ab = of(kind).at(step_bytes);
  if (!nccl) {
    CollectiveChoice simple;
    simple.step_alpha_s = ab.alpha_s;
    simple.time_s = ring_steps(kind, ranks) * ab.step_time_s(step_bytes);
    return simple;
  }
  RingShape shape;
  shape.ranks = ranks;
  // A group timed for more nodes than it has ranks (a smaller group on the same links).
  shape.nodes = std::clamp(nccl->nodes, 1, std::max(1, ranks));
  shape.inter_alpha_s = ab.alpha_s * nccl->inter_alpha_share;
  shape.intra_alpha_s = ab.alpha_s - shape.inter_alpha_s;
  shape.beta_s_per_byte = ab.beta_s_per_byte;
  return choose_collective(nccl->node, kind, full_bytes, shape);
}

namespace {

struct RingEdge {
  double latency_s = 0;
  double bandwidth_Bps = std::numeric_limits<double>::infinity();
};

// A ring's edges as its collectives pay them: NCCL's rings pipeline each step's chunks hop by
// hop, so a step costs the mean latency of the ring's edges (a 512-GPU ring of 64 servers pays
// 64 network hops and 448 NVLink hops a lap, not 512 network hops); its bandwidth is its
// narrowest edge's. The simulator charges the same per step (sim/ring_collective).
struct RingPath {
  double latency_sum_s = 0;
  double inter_latency_sum_s = 0;  // the cross-node edges' part
  double edges = 0;
  double bandwidth_Bps = std::numeric_limits<double>::infinity();
  void add(const RingEdge& edge, double count = 1) {
    if (count <= 0) return;
    latency_sum_s += count * edge.latency_s;
    edges += count;
    bandwidth_Bps = std::min(bandwidth_Bps, edge.bandwidth_Bps);
  }
  double mean_latency_s() const { return edges > 0 ? latency_sum_s / edges : 0.0; }
  double inter_share() const { return latency_sum_s > 0 ? inter_latency_sum_s / latency_sum_s : 0; }
  AlphaBeta alpha_beta() const {
    return {mean_latency_s(), std::isfinite(bandwidth_Bps) ? 1.0 / bandwidth_Bps : 0.0};
  }
};

// One node's ring over its GPUs (the order the fabric visits them: switch by switch, socket by
// socket), and the latency of its closing edge (last GPU back to the first), the edge a ring
// across nodes replaces by its hop to the next node.
struct NodeRing {
  RingPath path;
  double closing_latency_s = 0;
};

NodeRing intra_node_ring(const NodeTopology& node) {
  NodeRing ring;
  const int gpus = node.gpus;
  if (gpus <= 1) return ring;
  switch (node.kind) {
    case NodeKind::nvlink_mesh:
      ring.path.add({node.gpu_link.latency_s, node.gpu_link.bandwidth_Bps}, gpus);
      ring.closing_latency_s = node.gpu_link.latency_s;
      break;
    case NodeKind::nvswitch:
      ring.path.add({2 * node.gpu_link.latency_s, node.gpu_link.bandwidth_Bps}, gpus);
      ring.closing_latency_s = 2 * node.gpu_link.latency_s;
      break;
    case NodeKind::pcie: {
      const PcieTree& tree = node.pcie;
      const Link& port = tree.gpu_link;
      const int switches = tree.sockets * tree.switches_per_socket;
      const int tree_gpus = switches * tree.gpus_per_switch;
      // Edges of the whole tree's ring: within a switch, between switches of a socket, between
      // sockets (the ring leaves and re-enters each socket once).
      const RingEdge within{2 * port.latency_s, port.bandwidth_Bps};
      const Link& up = tree.switch_uplink;
      const RingEdge across{2 * port.latency_s + 2 * up.latency_s,
                            std::min(port.bandwidth_Bps, up.bandwidth_Bps)};
      const RingEdge across_sockets{
          across.latency_s + tree.inter_socket.latency_s,
          std::min(across.bandwidth_Bps, tree.inter_socket.bandwidth_Bps)};
      RingPath whole;
      if (switches <= 1) {
        whole.add(within, tree_gpus);
        ring.closing_latency_s = within.latency_s;
      } else {
        // Each uplink direction carries one ring flow.
        const int socket_edges = tree.sockets > 1 ? tree.sockets : 0;
        whole.add(within, tree_gpus - switches);
        whole.add(across, switches - socket_edges);
        whole.add(across_sockets, socket_edges);
        ring.closing_latency_s = socket_edges > 0 ? across_sockets.latency_s : across.latency_s;
      }
      if (gpus == tree_gpus) {
        ring.path = whole;
      } else {
        // A group on some of the tree's GPUs: its edges taken as the whole ring's on average.
        ring.path.add({whole.mean_latency_s(), whole.bandwidth_Bps}, gpus);
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

// A ring over `nodes` nodes: each node's ring less its closing edge, then one edge to the next
// node; `crossings` of those cross the leaf-spine's uplinks (once per leaf the ring visits).
RingPath ring_across_nodes(const NodeRing& node_ring, int nodes, const RingEdge& to_next_node,
                           int crossings, double uplinks_latency_s) {
  RingPath ring;
  ring.latency_sum_s = nodes * (node_ring.path.latency_sum_s - node_ring.closing_latency_s);
  ring.edges = nodes * std::max(0.0, node_ring.path.edges - 1);
  ring.bandwidth_Bps = node_ring.path.bandwidth_Bps;
  const double before_s = ring.latency_sum_s;
  ring.add(to_next_node, nodes - crossings);
  ring.add({to_next_node.latency_s + uplinks_latency_s, to_next_node.bandwidth_Bps}, crossings);
  ring.inter_latency_sum_s = ring.latency_sum_s - before_s;
  return ring;
}

// The leaves a ring over `nodes` consecutive nodes visits, when it visits more than one.
int leaf_crossings(const Topology& topology, int nodes) {
  if (!topology.leaf_spine) return 0;
  const int leaves = topology.leaf_spine->leaves(nodes);
  return leaves > 1 ? leaves : 0;
}

}  // namespace

DerivedTimings derive_timings(const Topology& physical) {
  const Topology topology = with_duplex_sharing(physical);
  const NodeRing intra = intra_node_ring(topology.node);
  DerivedTimings timings;
  timings.intra_node = intra.path.alpha_beta();
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
  double uplinks_latency_s = 0;
  if (leaf_spine && leaf_spine->leaves(topology.nodes) > 1) {
    uplinks_latency_s = 2 * leaf_spine->uplink.latency_s;
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
  const int crossings = leaf_crossings(topology, topology.nodes);
  const RingPath world = ring_across_nodes(
      intra, topology.nodes, {cross_latency_s, world_cross_Bps}, crossings, uplinks_latency_s);
  timings.world = world.alpha_beta();
  timings.world_inter_alpha_share = world.inter_share();
  timings.inter_node = ring_across_nodes(NodeRing{}, topology.nodes, {inter_latency_s, inter_Bps},
                                         crossings, uplinks_latency_s)
                           .alpha_beta();
  return timings;
}

namespace {

RingPath group_ring_path(const Topology& physical, int members_per_node, int nodes) {
  const Topology topology = with_duplex_sharing(physical);
  NodeTopology members = topology.node;
  members.gpus = std::max(1, members_per_node);
  const NodeRing node_ring = intra_node_ring(members);
  if (nodes <= 1) return node_ring.path;
  const double latency_s = 2 * gpu_to_nic_latency_s(topology.node) + 2 * topology.nic.latency_s;
  const double uplinks_latency_s =
      topology.leaf_spine ? 2 * topology.leaf_spine->uplink.latency_s : 0.0;
  const double groups_per_node =
      std::max(1.0, static_cast<double>(topology.node.gpus) / std::max(1, members_per_node));
  const double nic_share_Bps =
      topology.nic.bandwidth_Bps * topology.nics_per_node / groups_per_node;
  const double to_nic_Bps = topology.node.kind == NodeKind::pcie
                                ? std::min(topology.node.pcie.gpu_link.bandwidth_Bps,
                                           topology.node.pcie.switch_uplink.bandwidth_Bps)
                                : topology.node.gpu_link.bandwidth_Bps;
  return ring_across_nodes(node_ring, nodes, {latency_s, std::min(nic_share_Bps, to_nic_Bps)},
                           leaf_crossings(topology, nodes), uplinks_latency_s);
}

}  // namespace

AlphaBeta group_ring_timing(const Topology& topology, int members_per_node, int nodes) {
  return group_ring_path(topology, members_per_node, nodes).alpha_beta();
}

GroupRingTiming group_ring(const Topology& topology, int members_per_node, int nodes) {
  const RingPath path = group_ring_path(topology, members_per_node, nodes);
  return {path.alpha_beta(), path.inter_share()};
}

GroupTiming group_timing_for(const Cluster& cluster, AlphaBeta alpha_beta, int nodes,
                             double inter_alpha_share) {
  GroupTiming timing = GroupTiming::uniform(alpha_beta);
  if (cluster.collectives == CollectiveLibrary::nccl && cluster.topology) {
    const NodeKind kind = cluster.topology->node.kind;
    timing.nccl = NcclGroup{NcclNode{kind != NodeKind::pcie}, std::max(1, nodes),
                            std::clamp(inter_alpha_share, 0.0, 1.0)};
  }
  return timing;
}

void derive_group_timings(Cluster& cluster) {
  const Topology& topology = cluster.topology.value();
  const DerivedTimings derived = derive_timings(topology);
  cluster.world =
      group_timing_for(cluster, derived.world, topology.nodes, derived.world_inter_alpha_share);
  cluster.intra_node = group_timing_for(cluster, derived.intra_node, 1, 0.0);
  cluster.inter_node =
      group_timing_for(cluster, derived.inter_node, topology.nodes, topology.nodes > 1 ? 1.0 : 0.0);
}

namespace {

// A directed link of a PCIe tree: the kind of link, which one, and the direction crossed.
enum class TreeLink { gpu_port, switch_uplink, inter_socket };
struct TreeHop {
  TreeLink link;
  int index;
  bool upward;  // towards the root complex (inter-socket: towards the higher socket)
  auto operator<=>(const TreeHop&) const = default;
};

// The links the route from local GPU `from` to local GPU `to` crosses in a PCIe tree: its GPU
// port, then (other switch) its switch's uplink, (other socket) the chain of sockets, the other
// switch's uplink, the other GPU's port.
std::vector<TreeHop> tree_route(const PcieTree& tree, int from, int to) {
  const int switch_from = from / tree.gpus_per_switch;
  const int switch_to = to / tree.gpus_per_switch;
  const int socket_from = switch_from / tree.switches_per_socket;
  const int socket_to = switch_to / tree.switches_per_socket;
  std::vector<TreeHop> route{{TreeLink::gpu_port, from, true}};
  if (switch_from != switch_to) {
    route.push_back({TreeLink::switch_uplink, switch_from, true});
    const int step = socket_to > socket_from ? 1 : -1;
    for (int socket = socket_from; socket != socket_to; socket += step) {
      route.push_back({TreeLink::inter_socket, std::min(socket, socket + step), step > 0});
    }
    route.push_back({TreeLink::switch_uplink, switch_to, false});
  }
  route.push_back({TreeLink::gpu_port, to, false});
  return route;
}

const Link& tree_link(const PcieTree& tree, TreeLink link) {
  switch (link) {
    case TreeLink::gpu_port:
      return tree.gpu_link;
    case TreeLink::switch_uplink:
      return tree.switch_uplink;
    case TreeLink::inter_socket:
      return tree.inter_socket;
  }
  return tree.gpu_link;
}

// Consecutive members' edges of a ring over `members`, and its closing edge when asked.
std::vector<std::pair<int, int>> ring_edges(const std::vector<int>& members, bool closes) {
  std::vector<std::pair<int, int>> edges;
  for (std::size_t i = 0; i + 1 < members.size(); ++i)
    edges.push_back({members[i], members[i + 1]});
  if (closes && members.size() > 1) edges.push_back({members.back(), members.front()});
  return edges;
}

}  // namespace

double shared_ring_bandwidth_Bps(const Topology& topology,
                                 const std::vector<std::vector<int>>& groups, std::size_t which,
                                 bool closes_in_node) {
  double narrowest_Bps = std::numeric_limits<double>::infinity();
  if (topology.node.kind != NodeKind::pcie || which >= groups.size()) return narrowest_Bps;
  const PcieTree& tree = topology.node.pcie;
  auto key = [&](TreeHop hop) {
    if (!topology.split_duplex) hop.upward = true;  // one link for both directions
    return hop;
  };
  std::map<TreeHop, int> edges_on;
  for (const auto& group : groups) {
    for (const auto& [from, to] : ring_edges(group, closes_in_node)) {
      for (const TreeHop& hop : tree_route(tree, from, to)) ++edges_on[key(hop)];
    }
  }
  for (const auto& [from, to] : ring_edges(groups[which], closes_in_node)) {
    for (const TreeHop& hop : tree_route(tree, from, to)) {
      narrowest_Bps =
          std::min(narrowest_Bps, tree_link(tree, hop.link).bandwidth_Bps / edges_on.at(key(hop)));
    }
  }
  return narrowest_Bps;
}

AlphaBeta point_to_point_timing(const Topology& topology, bool across_nodes, int senders_per_node) {
  if (!across_nodes) {
    NodeTopology pair = topology.node;
    pair.gpus = 2;
    return intra_node_ring(pair).path.alpha_beta();
  }
  if (senders_per_node <= 0 || senders_per_node >= topology.node.gpus) {
    return group_ring_timing(topology, 1, 2);
  }
  // As a group of one GPU a node among `senders_per_node` such groups sharing the NICs.
  Topology fewer = topology;
  fewer.node.gpus = senders_per_node;
  return group_ring_timing(fewer, 1, 2);
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

const GroupTiming& Cluster::group_timing(int group_ranks) const {
  const auto found = timing_by_group_size.find(group_ranks);
  return found == timing_by_group_size.end() ? world : found->second;
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

Gpu with_compute_time_scaled(Gpu gpu, double factor) {
  auto scale_law = [factor](ComputeLaw& law) {
    law.fixed_s *= factor;
    law.host_floor_s *= factor;
    if (law.extra_slice_s) *law.extra_slice_s *= factor;
    if (law.score_row_s) *law.score_row_s *= factor;
    for (std::optional<double>* rate :
         {&law.flops_per_s, &law.score_flops_per_s, &law.activation_bytes_per_s}) {
      if (*rate) **rate /= factor;
    }
  };
  for (auto& [kind, compute] : gpu.operator_compute) {
    scale_law(compute.forward);
    scale_law(compute.backward);
  }
  if (gpu.compute_flops_per_s) *gpu.compute_flops_per_s /= factor;
  return gpu;
}

}  // namespace osdp
