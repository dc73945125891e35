#include "model/collective_protocols.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace osdp {
namespace {

constexpr double us = 1e-6;

// NCCL's tuning constants (src/graph/tuning.cc, 2.19-2.23), by protocol LL, LL128, Simple.
constexpr std::array<double, 3> ring_base_latency_s{6.6 * us, 14.0 * us, 8.4 * us};
constexpr std::array<double, 3> tree_base_latency_s{6.8 * us, 14.0 * us, 8.4 * us};
constexpr std::array<double, 3> ring_hop_nvlink_us{0.6, 1.9, 3.4};
constexpr std::array<double, 3> ring_hop_pcie_us{1.0, 2.5, 5.7};
constexpr std::array<double, 3> ring_hop_net_us{2.7, 4.0, 14.0};
constexpr std::array<double, 3> tree_hop_nvlink_us{0.6, 1.25, 4.0};
constexpr std::array<double, 3> tree_hop_pcie_us{1.0, 1.9, 4.0};
constexpr std::array<double, 3> tree_hop_net_us{5.0, 8.5, 14.0};
constexpr double ll128_efficiency = 0.92;
constexpr double tree_efficiency = 0.92;
constexpr int simple_index = 2;

int index_of(CollectiveProtocol protocol) {
  switch (protocol) {
    case CollectiveProtocol::ll:
      return 0;
    case CollectiveProtocol::ll128:
      return 1;
    case CollectiveProtocol::simple:
      return simple_index;
  }
  return simple_index;
}

// A hop's latency under `protocol` over NCCL's Simple ring hop on the same link class.
double hop_ratio(const std::array<double, 3>& hops_us, const std::array<double, 3>& simple_us,
                 CollectiveProtocol protocol) {
  return hops_us[index_of(protocol)] / simple_us[simple_index];
}

// Payload bandwidth of `protocol` over Simple's.
double efficiency(CollectiveProtocol protocol, CollectiveKind kind, int nodes) {
  switch (protocol) {
    case CollectiveProtocol::ll:
      return (nodes > 1 || kind == CollectiveKind::all_reduce) ? 0.25 : 1.0 / 3.0;
    case CollectiveProtocol::ll128:
      return ll128_efficiency;
    case CollectiveProtocol::simple:
      return 1.0;
  }
  return 1.0;
}

bool allowed(const NcclNode& node, CollectiveProtocol protocol) {
  return protocol != CollectiveProtocol::ll128 || node.nvlink;
}

double base_offset_s(const std::array<double, 3>& base_s, CollectiveProtocol protocol) {
  return base_s[index_of(protocol)] - ring_base_latency_s[simple_index];
}

CollectiveChoice ring_choice(const NcclNode& node, CollectiveKind kind, double full_bytes,
                             const RingShape& shape, CollectiveProtocol protocol) {
  const int steps = ring_steps(kind, shape.ranks);
  CollectiveChoice choice;
  choice.protocol = protocol;
  if (steps == 0) return choice;
  const auto& intra_hops = node.nvlink ? ring_hop_nvlink_us : ring_hop_pcie_us;
  const double hop_alpha_s =
      shape.intra_alpha_s * hop_ratio(intra_hops, intra_hops, protocol) +
      shape.inter_alpha_s * hop_ratio(ring_hop_net_us, ring_hop_net_us, protocol);
  // The base latency's difference from Simple's, spread over the steps, never below zero.
  choice.step_alpha_s =
      std::max(0.0, hop_alpha_s + base_offset_s(ring_base_latency_s, protocol) / steps);
  choice.byte_factor = 1.0 / efficiency(protocol, kind, shape.nodes);
  const double step_bytes = ring_step_bytes(full_bytes, shape.ranks);
  choice.time_s =
      steps * (choice.step_alpha_s + step_bytes * choice.byte_factor * shape.beta_s_per_byte);
  return choice;
}

// NCCL's tree all-reduce: up a chain inside each node and a binary tree over the nodes, then
// down again. The cluster's per-hop latencies: an intra-node ring edge's and a cross-node one's.
CollectiveChoice tree_choice(const NcclNode& node, double full_bytes, const RingShape& shape,
                             CollectiveProtocol protocol) {
  const int per_node = shape.ranks / shape.nodes;
  const int intra_edges = shape.ranks - shape.nodes;
  const double intra_hop_s = intra_edges > 0 ? shape.intra_alpha_s * shape.ranks / intra_edges : 0;
  const double inter_hop_s = shape.inter_alpha_s * shape.ranks / shape.nodes;
  const auto& intra_hops = node.nvlink ? tree_hop_nvlink_us : tree_hop_pcie_us;
  const auto& intra_simple = node.nvlink ? ring_hop_nvlink_us : ring_hop_pcie_us;
  const double depth = std::ceil(std::log2(static_cast<double>(shape.nodes)));
  const double latency_s =
      base_offset_s(tree_base_latency_s, protocol) +
      2 * ((per_node - 1) * intra_hop_s * hop_ratio(intra_hops, intra_simple, protocol) +
           depth * inter_hop_s * hop_ratio(tree_hop_net_us, ring_hop_net_us, protocol));
  CollectiveChoice choice;
  choice.algorithm = CollectiveAlgorithm::tree;
  choice.protocol = protocol;
  choice.byte_factor =
      1.0 / (tree_efficiency * efficiency(protocol, CollectiveKind::all_reduce, shape.nodes));
  choice.time_s =
      std::max(0.0, latency_s) + 2 * full_bytes * choice.byte_factor * shape.beta_s_per_byte;
  return choice;
}

constexpr std::array<CollectiveProtocol, 3> protocols{
    CollectiveProtocol::simple, CollectiveProtocol::ll128, CollectiveProtocol::ll};

}  // namespace

std::string_view algorithm_name(CollectiveAlgorithm algorithm) {
  return algorithm == CollectiveAlgorithm::tree ? "tree" : "ring";
}

std::string_view protocol_name(CollectiveProtocol protocol) {
  switch (protocol) {
    case CollectiveProtocol::simple:
      return "Simple";
    case CollectiveProtocol::ll128:
      return "LL128";
    case CollectiveProtocol::ll:
      return "LL";
  }
  return "?";
}

CollectiveChoice ring_with_protocol(const NcclNode& node, CollectiveKind kind, double full_bytes,
                                    const RingShape& shape, CollectiveProtocol protocol) {
  return ring_choice(node, kind, full_bytes, shape, protocol);
}

CollectiveChoice choose_collective(const NcclNode& node, CollectiveKind kind, double full_bytes,
                                   const RingShape& shape) {
  // Simple first: on a tie (a one-rank group, a free network) the plain ring stays.
  CollectiveChoice best = ring_choice(node, kind, full_bytes, shape, CollectiveProtocol::simple);
  if (ring_steps(kind, shape.ranks) == 0) return best;
  const bool tree =
      kind == CollectiveKind::all_reduce && shape.nodes > 1 && shape.ranks % shape.nodes == 0;
  for (CollectiveProtocol protocol : protocols) {
    if (!allowed(node, protocol)) continue;
    const CollectiveChoice ring = ring_choice(node, kind, full_bytes, shape, protocol);
    if (ring.time_s < best.time_s) best = ring;
    if (!tree) continue;
    const CollectiveChoice chosen_tree = tree_choice(node, full_bytes, shape, protocol);
    if (chosen_tree.time_s < best.time_s) best = chosen_tree;
  }
  return best;
}

}  // namespace osdp
