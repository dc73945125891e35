// Process groups and their rings, laid on the cluster: for every ring edge the flows it carries
// (one per channel), their endpoints and routes. Pure data, independent of SimGrid; the platform
// is built from it. A cluster without topology (the paper form) becomes a logical ring per
// group whose every step costs alpha + bytes * beta of the group's timing.
#pragma once

#include <compare>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "model/cluster.hpp"
#include "sim/fabric.hpp"

namespace osdp::sim {

enum class GroupKind { world, intra_node, inter_node };

struct Group {
  GroupKind kind = GroupKind::world;
  std::vector<int> members;  // ranks, ascending
};

// A flow's end: a GPU, optionally one of its NIC channels (tag >= 0) so that several routes
// between the same two GPUs can coexist.
struct Endpoint {
  int rank = 0;
  int tag = -1;
  auto operator<=>(const Endpoint&) const = default;
};

struct Channel {
  Endpoint from;
  Endpoint to;
  std::vector<Hop> hops;  // into NetworkPlan::links
  double latency_s = 0;   // sum over the route
  double share = 1.0;     // fraction of the step's bytes this channel carries
};

struct RingEdge {
  std::vector<Channel> channels;
};

// One flow of a ring on one link direction: the share of each step's bytes it carries and its
// route latency (links are shared equally: the platform's links carry no latency).
struct FlowLoad {
  int constraint = 0;
  double share = 1;
  double latency_s = 0;
};

struct GroupRing {
  std::vector<int> order;       // members in ring order
  std::vector<RingEdge> edges;  // edges[i]: order[i] -> order[i + 1 mod n]
  double alpha_s = 0;           // a step's latency: the mean route latency of the edges
  double inter_alpha_s = 0;     // of alpha_s, the cross-node edges' part
  int nodes = 1;                // nodes the members span
  // Clusters with `"collectives": "nccl"`: each collective runs NCCL's choice for this ring
  // (model/collective_protocols.hpp), with the same inputs the analytic model gives it.
  std::optional<NcclNode> nccl;
  // Every link direction each of its flows crosses (constraint_of, ascending), and the edge
  // rate the ring sustains alone: scale mode tells from them whether other rings in flight slow
  // it down.
  std::vector<FlowLoad> loads;
  double alone_edge_rate_Bps = std::numeric_limits<double>::infinity();
  // Paper-form clusters: each step costs alpha + bytes * beta of this timing. Their routes are
  // one logical link per ring edge that carries time, not bytes: a flow of bytes * beta seconds
  // is sent as bytes * beta * logical_units_per_s units, so flows sharing an edge share it.
  std::optional<GroupTiming> logical;
};

// Resolution of logical links: one unit is a picosecond of transfer.
inline constexpr double logical_units_per_s = 1e12;

// The endpoint tag of a node's host memory (its rank field is the node).
inline constexpr int host_memory_tag = -2;

// One GPU's copies to and from its host memory (CPU offload): over a PCIe tree its GPU link and
// switch uplink to its socket's root complex, then that socket's share of the memory bandwidth;
// on NVLink and NVSwitch nodes its own host link, then the node's memory bandwidth. The copies
// share those links with the collectives that cross them.
struct HostChannels {
  Channel to_host;
  Channel to_device;
};

struct NetworkPlan {
  std::vector<FabricLink> links;
  bool split_duplex = true;
  std::vector<GroupRing> rings;             // one per group, same order
  std::vector<HostChannels> host_channels;  // per rank; empty without a topology
};

NetworkPlan plan_network(const Cluster& cluster, const std::vector<Group>& groups);

// Links as capacity constraints: each direction of a split-duplex link is one, a shared link
// is one for both directions; 2 x links in all.
int constraint_of(const Hop& hop, bool split_duplex);

// The rings in flight on each link direction. Scale mode aggregates a ring's steps only while it
// contends with no other ring: two rings contend on a link direction where each would get, for
// one of its flows there, less than its pace alone needs (flows share a link equally). A ring that
// keeps its pace takes the same bandwidth whether the other one moves in steps or not, and the
// other gets the rest either way: an NIC-bound cross-node ring beside an intra-node ring on a GPU's
// NVSwitch link. Concurrent collectives of the same ring (two lanes) load every link alike and do
// not count.
class RingsInFlight {
 public:
  explicit RingsInFlight(const NetworkPlan& plan);
  void begin(const GroupRing& ring);
  void end(const GroupRing& ring);
  bool slowed_by_others(const GroupRing& ring) const;

 private:
  bool slowed_at(const GroupRing& ring, int constraint) const;
  struct OnLink {
    std::vector<std::pair<const GroupRing*, int>> rings;  // with their collectives in flight
    double weight = 0;  // sum of 1 / latency over the flows in flight
  };
  std::vector<double> capacities_Bps_;
  std::vector<OnLink> on_constraint_;
};

// The world group and, on multi-node clusters, the intra-node and inter-node groups.
std::vector<int> world_members(const Cluster& cluster);

}  // namespace osdp::sim
