#include "sim/network.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
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

// The link directions a ring's flows cross, ideal links left out.
std::vector<int> ring_constraints(const std::vector<RingEdge>& edges,
                                  const std::vector<FabricLink>& links, bool split_duplex) {
  std::set<int> constraints;
  for (const auto& edge : edges) {
    for (const auto& channel : edge.channels) {
      for (const Hop& hop : channel.hops) {
        if (!links.at(hop.link).ideal) constraints.insert(constraint_of(hop, split_duplex));
      }
    }
  }
  return {constraints.begin(), constraints.end()};
}

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
  ring.constraints = ring_constraints(ring.edges, plan.links, plan.split_duplex);
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
    for (const auto& channel : edge.channels)
      ring.alpha_s = std::max(ring.alpha_s, channel.latency_s);
    ring.edges.push_back(std::move(edge));
  }
  ring.constraints = ring_constraints(ring.edges, fabric.links(), topology.split_duplex);
  return ring;
}

}  // namespace

int constraint_of(const Hop& hop, bool split_duplex) {
  return 2 * hop.link + (split_duplex && hop.up ? 1 : 0);
}

void RingsInFlight::begin(const GroupRing& ring) {
  for (int constraint : ring.constraints) {
    auto& rings = on_constraint_.at(constraint);
    auto it = std::find_if(rings.begin(), rings.end(),
                           [&ring](const auto& entry) { return entry.first == &ring; });
    if (it == rings.end()) {
      rings.push_back({&ring, 1});
    } else {
      ++it->second;
    }
  }
}

void RingsInFlight::end(const GroupRing& ring) {
  for (int constraint : ring.constraints) {
    auto& rings = on_constraint_.at(constraint);
    auto it = std::find_if(rings.begin(), rings.end(),
                           [&ring](const auto& entry) { return entry.first == &ring; });
    if (it == rings.end()) throw std::logic_error("sim: a ring ended that was not in flight");
    if (--it->second == 0) rings.erase(it);
  }
}

bool RingsInFlight::shares_links(const GroupRing& ring) const {
  for (int constraint : ring.constraints) {
    for (const auto& [other, count] : on_constraint_.at(constraint)) {
      if (other != &ring) return true;
    }
  }
  return false;
}

std::vector<int> world_members(const Cluster& cluster) {
  std::vector<int> members(cluster.ranks);
  std::iota(members.begin(), members.end(), 0);
  return members;
}

NetworkPlan plan_network(const Cluster& cluster, const std::vector<Group>& groups) {
  NetworkPlan plan;
  if (cluster.topology) {
    const Fabric fabric(*cluster.topology);
    plan.links = fabric.links();
    plan.split_duplex = cluster.topology->split_duplex;
    for (const auto& group : groups) plan.rings.push_back(fabric_ring(fabric, group));
  } else {
    for (std::size_t g = 0; g < groups.size(); ++g) {
      plan.rings.push_back(logical_ring(cluster, groups[g], static_cast<int>(g), plan));
    }
  }
  return plan;
}

}  // namespace osdp::sim
