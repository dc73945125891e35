// NCCL's choice of algorithm and protocol for one collective, for clusters that declare
// `"collectives": "nccl"`.
//
// NCCL times every (algorithm, protocol) pair it may run with one formula and runs the fastest
// (src/graph/tuning.cc, NCCL 2.19-2.23): base latency + hops x per-hop latency of the link each
// hop crosses + bytes / (bus bandwidth x the protocol's efficiency). osdp keeps the cluster's
// own per-hop latencies and ring bandwidth as NCCL's ring "Simple" protocol (what large messages
// run, and what the cluster's links describe) and scales them by NCCL's own ratios for the
// others:
//   Simple  every byte is payload; a step pays the hop latency.
//   LL128   120 of every 128 bytes are payload (NCCL: 0.92 of the bandwidth); a hop costs
//           1.9 / 3.4 of Simple's on NVLink, 4.0 / 14 across the network; NCCL enables
//           it only on nodes whose GPUs all talk over NVLink.
//   LL      half of every 8-byte line is a flag (NCCL: 1/3 of the bandwidth, 1/4 across nodes
//           or in an all-reduce); a hop costs 0.6 / 3.4 (NVLink), 1.0 / 5.7 (PCIe), 2.7 / 14
//           (network).
// and, for an all-reduce across nodes, the tree: a chain through each node's GPUs and a binary
// tree over the nodes, 2 x (GPUs a node - 1 + log2 nodes) hops instead of 2 (ranks - 1), at
// NCCL's 0.92 of the ring bandwidth for its two passes (reduce up, broadcast down).
// Base latencies differ by protocol (ring: LL 6.6 us, LL128 14 us, Simple 8.4 us; tree 6.8,
// 14, 8.4): the difference from the ring Simple's is added to the whole collective, so that the
// Simple ring is exactly the alpha-beta ring the rest of osdp times (model/collectives.hpp).
#pragma once

#include <string_view>

#include "model/collectives.hpp"

namespace osdp {

enum class CollectiveAlgorithm { ring, tree };
enum class CollectiveProtocol { simple, ll128, ll };

std::string_view algorithm_name(CollectiveAlgorithm algorithm);
std::string_view protocol_name(CollectiveProtocol protocol);

// How a cluster runs its collectives.
//   ring: ring collectives only, each step at the cluster's per-hop latency and bandwidth
//         (Gloo; calibrated clusters, whose measured timings already hold the library's
//         choices; clusters fitted to measured iterations).
//   nccl: NCCL's choice above, from the cluster's per-hop latencies and bandwidth.
enum class CollectiveLibrary { ring, nccl };

// The links a node's GPUs talk over (NCCL's NVLINK or PCI latency class; across nodes NET).
struct NcclNode {
  bool nvlink = true;  // NVLink or NVSwitch; false: PCIe
};

// A group's ring as the model or the simulator lays it: its ranks, the nodes they span, the
// per-step latency split into the node-internal edges' and the cross-node edges' part (their
// sum is the ring's mean edge latency, alpha), and the seconds per byte of its narrowest edge.
struct RingShape {
  int ranks = 1;
  int nodes = 1;
  double intra_alpha_s = 0;
  double inter_alpha_s = 0;
  double beta_s_per_byte = 0;
};

// What NCCL would run and what it costs uncontended. A ring runs `steps` steps of
// `step_alpha_s` each, moving `byte_factor` bytes on the wire per byte of payload (the
// protocol's base latency folded into the per-step latency); a tree takes `time_s`.
struct CollectiveChoice {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
  CollectiveProtocol protocol = CollectiveProtocol::simple;
  double step_alpha_s = 0;
  double byte_factor = 1;
  double time_s = 0;
};

// The fastest choice for `kind` of a `full_bytes` buffer over `shape`.
CollectiveChoice choose_collective(const NcclNode& node, CollectiveKind kind, double full_bytes,
                                   const RingShape& shape);

// One given ring protocol and its time, whether or not NCCL would choose it (what tests compare
// the choice with).
CollectiveChoice ring_with_protocol(const NcclNode& node, CollectiveKind kind, double full_bytes,
                                    const RingShape& shape, CollectiveProtocol protocol);

}  // namespace osdp
