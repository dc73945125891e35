#include "sim/network.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>

namespace osdp::sim {
namespace {

const GroupTiming& timing_of(const Cluster& cluster, GroupKind kind) {
  switch (kind) {
    case GroupKind::world:
      return cluster.world;
    case GroupKind::intra_node:
      return cluster.intra_node;
    case GroupKind::inter_node:
      return cluster.inter_node;
  }
  return cluster.world;
}

// Every link direction each flow of the ring crosses, ideal links left out.
std::vector<FlowLoad> ring_loads(const std::vector<RingEdge>& edges,
                                 const std::vector<FabricLink>& links, bool split_duplex) {
  std::vector<FlowLoad> loads;
  for (const auto& edge : edges) {
    for (const auto& channel : edge.channels) {
      for (const Hop& hop : channel.hops) {
        if (links.at(hop.link).ideal) continue;
        loads.push_back({constraint_of(hop, split_duplex), channel.share, channel.latency_s});
      }
    }
  }
  std::sort(loads.begin(), loads.end(),
            [](const FlowLoad& a, const FlowLoad& b) { return a.constraint < b.constraint; });
  return loads;
}

// Every edge of a ring moves at one pace when it runs alone: the narrowest link over the share
// of an edge's bytes that crosses it.
double alone_edge_rate_Bps(const std::vector<FlowLoad>& loads,
                           const std::vector<FabricLink>& links) {
  std::map<int, double> share_by_constraint;
  for (const FlowLoad& load : loads) share_by_constraint[load.constraint] += load.share;
  double rate_Bps = std::numeric_limits<double>::infinity();
  for (const auto& [constraint, share] : share_by_constraint) {
    rate_Bps = std::min(rate_Bps, links.at(constraint / 2).link.bandwidth_Bps / share);
  }
  return rate_Bps;
}

// Calls visit(constraint, first, last) for each run of loads on one link direction.
template <typename Visit>
void for_each_link(const std::vector<FlowLoad>& loads, Visit visit) {
  for (auto first = loads.begin(); first != loads.end();) {
    const int constraint = first->constraint;
    const auto last = std::find_if(first, loads.end(), [constraint](const FlowLoad& load) {
      return load.constraint != constraint;
    });
    visit(constraint, first, last);
    first = last;
  }
}

// CM02's sharing penalty is the route latency, 1 for a route without latency: the platform's
// links carry no latency (flows pay it as a timer), so every flow weighs the same.
double sharing_weight(double /*latency_s*/) { return 1.0; }

GroupRing logical_ring(const Cluster& cluster, const Group& group, int group_index,
                       NetworkPlan& plan) {
  GroupRing ring;
  ring.order = group.members;
  ring.logical = timing_of(cluster, group.kind);
  const int n = static_cast<int>(ring.order.size());
  if (n < 2) return ring;
  for (int i = 0; i < n; ++i) {
    Channel channel;
    channel.from = {ring.order[i], group_index};
    channel.to = {ring.order[(i + 1) % n], group_index};
    const int id = static_cast<int>(plan.links.size());
    plan.links.push_back(
        {fmt::format("g{}.ring{}", group_index, i), -1, -1, Link{logical_units_per_s, 0.0}, false});
    channel.hops.push_back({id, true});
    ring.edges.push_back({{channel}});
  }
  ring.loads = ring_loads(ring.edges, plan.links, plan.split_duplex);
  ring.alone_edge_rate_Bps = alone_edge_rate_Bps(ring.loads, plan.links);
  return ring;
}

GroupRing fabric_ring(const Fabric& fabric, const Group& group) {
  GroupRing ring;
  std::vector<bool> member(fabric.ranks(), false);
  for (int rank : group.members) member.at(rank) = true;
  for (int rank : fabric.ring_order()) {
    if (member[rank]) ring.order.push_back(rank);
  }
  const int n = static_cast<int>(ring.order.size());
  if (n < 2) return ring;
  const Topology& topology = fabric.topology();
  // Groups with several GPUs of a node run one channel per NIC across nodes (NCCL's channels);
  // a group with one GPU per node uses the NIC nearest that GPU.
  std::vector<int> per_node(topology.nodes, 0);
  for (int rank : ring.order) ++per_node[fabric.node_of(rank)];
  const bool one_per_node = *std::max_element(per_node.begin(), per_node.end()) == 1;
  const int gpus_per_nic = std::max(1, topology.node.gpus / topology.nics_per_node);
  for (int i = 0; i < n; ++i) {
    const int a = ring.order[i];
    const int b = ring.order[(i + 1) % n];
    RingEdge edge;
    if (fabric.node_of(a) == fabric.node_of(b)) {
      Path path = fabric.path(a, b);
      edge.channels.push_back({{a, -1}, {b, -1}, std::move(path.hops), path.latency_s, 1.0});
    } else if (one_per_node) {
      const int nic = std::min(topology.nics_per_node - 1, (a % topology.node.gpus) / gpus_per_nic);
      Path path = fabric.path_via_nic(a, b, nic);
      edge.channels.push_back({{a, nic}, {b, nic}, std::move(path.hops), path.latency_s, 1.0});
    } else {
      for (int nic = 0; nic < topology.nics_per_node; ++nic) {
        Path path = fabric.path_via_nic(a, b, nic);
        edge.channels.push_back({{a, nic},
                                 {b, nic},
                                 std::move(path.hops),
                                 path.latency_s,
                                 1.0 / topology.nics_per_node});
      }
    }
    double edge_latency_s = 0;
    for (const auto& channel : edge.channels)
      edge_latency_s = std::max(edge_latency_s, channel.latency_s);
    ring.alpha_s += edge_latency_s / n;
    if (fabric.node_of(a) != fabric.node_of(b)) ring.inter_alpha_s += edge_latency_s / n;
    ring.edges.push_back(std::move(edge));
  }
  ring.nodes = static_cast<int>(
      std::count_if(per_node.begin(), per_node.end(), [](int members) { return members > 0; }));
  ring.loads = ring_loads(ring.edges, fabric.links(), topology.split_duplex);
  ring.alone_edge_rate_Bps = alone_edge_rate_Bps(ring.loads, fabric.links());
  return ring;
}

}  // namespace

int constraint_of(const Hop& hop, bool split_duplex) {
  return 2 * hop.link + (split_duplex && hop.up ? 1 : 0);
}

RingsInFlight::RingsInFlight(const NetworkPlan& plan)
    : capacities_Bps_(2 * plan.links.size()), on_constraint_(2 * plan.links.size()) {
  for (std::size_t link = 0; link < plan.links.size(); ++link) {
    capacities_Bps_[2 * link] = capacities_Bps_[2 * link + 1] = plan.links[link].link.bandwidth_Bps;
  }
}

void RingsInFlight::begin(const GroupRing& ring) {
  for_each_link(ring.loads, [&](int constraint, auto first, auto last) {
    OnLink& on_link = on_constraint_.at(constraint);
    for (auto load = first; load != last; ++load) on_link.weight += sharing_weight(load->latency_s);
    auto& rings = on_link.rings;
    auto it = std::find_if(rings.begin(), rings.end(),
                           [&ring](const auto& entry) { return entry.first == &ring; });
    if (it == rings.end()) {
      rings.push_back({&ring, 1});
    } else {
      ++it->second;
    }
  });
}

void RingsInFlight::end(const GroupRing& ring) {
  for_each_link(ring.loads, [&](int constraint, auto first, auto last) {
    OnLink& on_link = on_constraint_.at(constraint);
    auto& rings = on_link.rings;
    auto it = std::find_if(rings.begin(), rings.end(),
                           [&ring](const auto& entry) { return entry.first == &ring; });
    if (it == rings.end()) throw std::logic_error("sim: a ring ended that was not in flight");
    for (auto load = first; load != last; ++load) on_link.weight -= sharing_weight(load->latency_s);
    if (--it->second == 0) rings.erase(it);
    if (rings.empty()) on_link.weight = 0;  // no rounding left behind
  });
}

bool RingsInFlight::slowed_at(const GroupRing& ring, int constraint) const {
  const OnLink& on_link = on_constraint_.at(constraint);
  const auto [first, last] = std::equal_range(
      ring.loads.begin(), ring.loads.end(), FlowLoad{constraint},
      [](const FlowLoad& a, const FlowLoad& b) { return a.constraint < b.constraint; });
  for (auto load = first; load != last; ++load) {
    const double fair_share_Bps =
        capacities_Bps_[constraint] * sharing_weight(load->latency_s) / on_link.weight;
    if (fair_share_Bps < ring.alone_edge_rate_Bps * load->share * (1 - 1e-9)) return true;
  }
  return false;
}

bool RingsInFlight::slowed_by_others(const GroupRing& ring) const {
  bool slowed = false;
  for_each_link(ring.loads, [&](int constraint, auto, auto) {
    const auto& rings = on_constraint_.at(constraint).rings;
    if (slowed || rings.size() < 2 || !slowed_at(ring, constraint)) return;
    for (const auto& [other, collectives] : rings) {
      if (other != &ring && slowed_at(*other, constraint)) slowed = true;
    }
  });
  return slowed;
}

std::vector<int> world_members(const Cluster& cluster) {
  std::vector<int> members(cluster.ranks);
  std::iota(members.begin(), members.end(), 0);
  return members;
}

namespace {

// Each rank's route to its node's host memory, with the host links appended to `links`.
std::vector<HostChannels> host_channels(const Cluster& cluster, const Fabric& fabric,
                                        std::vector<FabricLink>& links) {
  const Topology& topology = fabric.topology();
  const HostMemory& host = cluster.host;
  const bool pcie = topology.node.kind == NodeKind::pcie;
  const int sockets = pcie ? topology.node.pcie.sockets : 1;
  // Memory links: per socket (its share of the node's bandwidth), or per node.
  std::vector<int> memory_link;  // [node * sockets + socket]
  for (int n = 0; n < topology.nodes; ++n) {
    for (int s = 0; s < sockets; ++s) {
      memory_link.push_back(static_cast<int>(links.size()));
      links.push_back({fmt::format("n{}.cpu{}-memory", n, s), -1, -1,
                       Link{host.memory_bandwidth_Bps / sockets, 0.0}, false});
    }
  }
  std::vector<HostChannels> channels;
  for (int rank = 0; rank < topology.ranks(); ++rank) {
    const int node = fabric.node_of(rank);
    Path path;
    int socket = 0;
    if (pcie) {
      path = fabric.path_to_cpu(rank);
      const PcieTree& tree = topology.node.pcie;
      socket = (rank % topology.node.gpus) / (tree.switches_per_socket * tree.gpus_per_switch);
    } else {
      const int link = static_cast<int>(links.size());
      links.push_back({fmt::format("n{}.gpu{}-host", node, rank % topology.node.gpus), -1, -1,
                       host.link, false});
      path.hops.push_back({link, true});
      path.latency_s = host.link.latency_s;
    }
    path.hops.push_back({memory_link.at(node * sockets + socket), true});
    const Endpoint gpu{rank, -1};
    const Endpoint memory{node * sockets + socket, host_memory_tag};
    HostChannels both;
    both.to_host = {gpu, memory, path.hops, path.latency_s, 1.0};
    both.to_device = {memory, gpu, {}, path.latency_s, 1.0};
    for (auto hop = path.hops.rbegin(); hop != path.hops.rend(); ++hop) {
      both.to_device.hops.push_back({hop->link, !hop->up});
    }
    channels.push_back(std::move(both));
  }
  return channels;
}

}  // namespace

NetworkPlan plan_network(const Cluster& cluster, const std::vector<Group>& groups) {
  NetworkPlan plan;
  if (cluster.topology) {
    const Fabric fabric(*cluster.topology);
    plan.links = fabric.links();
    plan.split_duplex = cluster.topology->split_duplex;
    for (const auto& group : groups) {
      plan.rings.push_back(fabric_ring(fabric, group));
      if (cluster.collectives == CollectiveLibrary::nccl) {
        plan.rings.back().nccl = NcclNode{cluster.topology->node.kind != NodeKind::pcie};
      }
    }
    plan.host_channels = host_channels(cluster, fabric, plan.links);
  } else {
    for (std::size_t g = 0; g < groups.size(); ++g) {
      plan.rings.push_back(logical_ring(cluster, groups[g], static_cast<int>(g), plan));
    }
  }
  return plan;
}

}  // namespace osdp::sim
