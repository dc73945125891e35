// A cluster: its GPUs, their topology and the collective timing the analytic model uses.
// The topology is what the simulator builds a platform from; the analytic model reduces it to
// alpha (seconds per ring step) and beta (seconds per byte) per process group.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/collective_protocols.hpp"
#include "model/collectives.hpp"
#include "model/json_reader.hpp"

namespace osdp {

struct Link {
  double bandwidth_Bps = 0;
  double latency_s = 0;
};

enum class NodeKind { pcie, nvlink_mesh, nvswitch };
std::string_view node_kind_name(NodeKind kind);

// GPU x16 port -> PCIe switch -> CPU root complex -> inter-socket link.
struct PcieTree {
  int sockets = 1;
  int switches_per_socket = 1;
  int gpus_per_switch = 8;
  Link gpu_link;       // GPU <-> its PCIe switch
  Link switch_uplink;  // PCIe switch <-> CPU root complex
  Link inter_socket;   // CPU <-> CPU (QPI / UPI)
};

struct NodeTopology {
  NodeKind kind = NodeKind::nvswitch;
  int gpus = 8;
  PcieTree pcie;  // kind == pcie
  Link gpu_link;  // nvlink_mesh: each GPU pair; nvswitch: each GPU <-> the switch
};

// A leaf-spine network between nodes (a two-level folded Clos, "fat tree"): consecutive groups
// of nodes_per_leaf nodes hang on one leaf switch each, and every leaf has one uplink to every
// spine. Traffic of a node's NIC c to another leaf goes up to spine c mod spines and down from
// it (static, as on rail-aligned fabrics without ECMP), so the NIC channels of a ring spread
// over the spines.
struct LeafSpine {
  int nodes_per_leaf = 1;
  int spines = 1;
  Link uplink;  // each leaf <-> spine link

  int leaves(int nodes) const { return (nodes + nodes_per_leaf - 1) / nodes_per_leaf; }
  int leaf_of(int node) const { return node / nodes_per_leaf; }
  int spine_of(int nic) const { return nic % spines; }
};

struct Topology {
  int nodes = 1;
  NodeTopology node;
  int nics_per_node = 1;  // NICs shared by the node's GPUs (set to gpus for a NIC per GPU)
  Link nic;               // NIC <-> network switch (leaf switch)
  // Between nodes: one network switch holding every NIC, or leaf and spine switches.
  std::optional<LeafSpine> leaf_spine;
  bool split_duplex = true;

  int ranks() const { return nodes * node.gpus; }
};

// The "fabric" object of a multi-node topology:
//   {"kind": "switch"}  (the default: every NIC on one network switch), or
//   {"kind": "leaf_spine", "nodes_per_leaf": 16, "spines": 8,
//    "uplink": {"bandwidth": "3200Gbps", "latency": "1us"}}.
// `nodes` is the cluster's node count; bad keys or values are InputErrors.
std::optional<LeafSpine> read_fabric(const JsonReader& fabric, int nodes);

// Alpha-beta of a collective, optionally by message size (calibrated clusters): the entry with
// the largest min_step_bytes not above the step size applies.
struct CollectiveTiming {
  struct Segment {
    double min_step_bytes = 0;
    AlphaBeta alpha_beta;
  };
  AlphaBeta alpha_beta;
  std::vector<Segment> by_size;

  AlphaBeta at(double step_bytes) const;
};

// A group of a cluster whose collectives follow NCCL's choice (model/collective_protocols.hpp):
// the nodes it spans and the part of its ring's per-step latency alpha that its cross-node
// edges make up.
struct NcclGroup {
  NcclNode node;
  int nodes = 1;
  double inter_alpha_share = 0;
};

// Timings of the three ring collectives within one process group.
struct GroupTiming {
  CollectiveTiming all_gather;
  CollectiveTiming reduce_scatter;
  CollectiveTiming all_reduce;
  std::optional<NcclGroup> nccl;  // unset: rings at alpha-beta (CollectiveLibrary::ring)

  static GroupTiming uniform(AlphaBeta alpha_beta);
  const CollectiveTiming& of(CollectiveKind kind) const;
  // Ring collective over `ranks` ranks of a buffer of `full_bytes` (NCCL's choice where set).
  double time_s(CollectiveKind kind, double full_bytes, int ranks) const;
  // What runs: the Simple ring at alpha-beta, or NCCL's choice.
  CollectiveChoice choice(CollectiveKind kind, double full_bytes, int ranks) const;
};

// Measured compute time of an operator kind, forward or backward, at batch b:
// fixed_s + b x ((the operator's FLOPs per sample) / flops_per_s + its saved activation bytes
// per sample / activation_bytes_per_s). The fixed part is what the
// operator costs whatever its batch (weight-sized work, small-matrix inefficiency; all of it
// for FLOP-free kinds such as the embedding); k slices share it. Without a rate the GPU's
// sustained rate applies.
//
// host_floor_s (0: none) bounds a call's time from below, whatever its batch: time per call =
// max(host_floor_s, fixed_s + b x FLOPs / flops_per_s). At small batches the host (Python, the
// framework, kernel launches) issues a call's kernels more slowly than the GPU runs them, and
// the GPU waits; above the floor the GPU's own law holds.
struct ComputeLaw {
  double fixed_s = 0;
  std::optional<double> flops_per_s;
  // What each slice after the first adds when the operator is split (its own kernels on
  // narrower matrices, the partial-sum add); unset: the generic launch + add estimate.
  std::optional<double> extra_slice_s;
  double host_floor_s = 0;  // last: laws written as {fixed, rate, extra_slice} keep no floor
  // The memory-bound work beside the MatMuls (norms, GELU, dropout, the softmax of the scores),
  // as the rate at which a call moves the activation bytes it saves for backward (a backward
  // twice those); it grows with sequence x hidden and heads x sequence^2 where the FLOPs grow
  // with hidden^2. Unset: none.
  std::optional<double> activation_bytes_per_s = std::nullopt;
  // The rate of attention's score FLOPs (QK^T and the attention over V: Operator::
  // score_forward_flops_per_sample), which run in the attention kernel rather than as GEMMs of the
  // hidden size; unset: `flops_per_s` for all of an operator's FLOPs.
  std::optional<double> score_flops_per_s = std::nullopt;
  // What the score kernel spends per query row and head beside its FLOPs (the softmax, loading
  // each tile of K and V; Operator::score_rows_per_sample): FlashAttention's rate rises with the
  // sequence length because this part does not. Unset: none. Fitted on a kernel table
  // (`osdp fit ... --table h100-sdpa-bf16.csv`).
  std::optional<double> score_row_s = std::nullopt;
};

struct OperatorCompute {
  ComputeLaw forward;
  ComputeLaw backward;
};

// One fixed probe's compute as `osdp calibrate` timed it: the probe GPT's operators, forward
// and backward, at one batch size, from the same medians its laws were fitted on. It is the
// machine's speed when calibrated: `osdp validate` times the same probe again before and after
// its runs, because a machine's speed can move within minutes of its calibration (a shared
// 2-core VM's by up to 18 %), and every time error moves with it.
struct ProbeShape {  // a generated GPT's (validate's GptShape holds the same)
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int sequence_length = 0;
  int vocabulary = 0;
};
struct SpeedReference {
  ProbeShape probe;
  int batch_size = 0;
  double compute_s = 0;  // every operator's forward + backward, summed
};

struct Gpu {
  std::string name = "gpu";
  std::optional<double> memory_bytes;
  // Sustained (not peak) FLOP/s on this model's kernels; gamma_i = FLOPs / this rate.
  std::optional<double> compute_flops_per_s;
  // The hardware's peak (dense fp16/bf16 tensor-core FLOP/s for GPUs): no sustained rate, nor
  // any per-kind law's, may exceed it (`osdp fit` bounds its rates by it).
  std::optional<double> peak_flops_per_s;
  std::optional<double> memory_bandwidth_Bps;
  // Bytes of optimizer states (parameters, gradients, moments) the update reads and writes per
  // second, each once: an implementation that passes over its tensors several times (as
  // unfused Adam does) has less than memory_bandwidth_Bps. Unset: memory_bandwidth_Bps.
  std::optional<double> optimizer_bandwidth_Bps;
  double kernel_launch_s = 5e-6;
  // Compute runs this many times slower while a collective overlaps it (simulator and extended
  // cost model). A cluster whose ranks share host cores ("host": {"cores": ...}, as `osdp
  // calibrate` writes) has 1 here: the core sharing stands for it (core_rate).
  double overlap_slowdown = 1.0;
  // Ranks that synchronise at every collective wait for the slowest: the slowest rank's compute
  // of a phase over the ranks' mean (measured), which the model's identical ranks take on.
  double straggler_slowdown = 1.0;
  // What a pipeline stage spends on each forward or backward pass beside its compute and its
  // transfers (the schedule's own send / receive calls and buffers; a pipeline engine's
  // instruction). Fitted by `osdp fit` on runs with pipeline parallelism; 0 elsewhere.
  double pipeline_pass_s = 0.0;
  // What each blocking tensor-parallel collective waits beyond its own time: the ranks do not
  // arrive together after a stretch of compute (CPU ranks whose threads the host schedules
  // late; about 1.5 ms a sum on a 2-core VM). Measured by `osdp calibrate` with a
  // tensor-parallel step of its probe; 0 elsewhere (GPUs arrive within microseconds).
  double blocking_sync_s = 0.0;
  // How much faster the transformer layers' and the head's matrix products run with fp8 inputs
  // (Transformer Engine's amp_fp8) than in bf16, the rest of the step unchanged; 1: no fp8.
  double fp8_speedup = 1.0;
  // Calibrated compute laws by operator kind name ("attention", "mlp", ...), measured by
  // `osdp calibrate`; kinds not listed use compute_flops_per_s.
  std::map<std::string, OperatorCompute, std::less<>> operator_compute;
  std::optional<SpeedReference> speed_reference;

  const OperatorCompute* compute_law(std::string_view kind) const;
};

// The GPU with all of its compute taking `factor` times as long: every operator law's fixed
// parts and floors multiplied, its rates divided, and the sustained rate divided (memory,
// optimizer and communication figures unchanged). What a cluster's laws become on a machine
// that now computes `factor` times slower than when it was calibrated.
Gpu with_compute_time_scaled(Gpu gpu, double factor);

// The CPU cores of a node whose ranks are processes on that CPU (the CPU testbed, `"host":
// {"cores": 2, "ranks_on_cores": true}`): every rank's compute thread and its communication
// thread (Gloo moves loopback bytes through the kernel: CPU work) run on these cores, which the
// operating system shares fairly among the busy threads. The compute laws and the collective
// timings are what a rank gets while every rank of the node runs one busy thread (each rank
// computing, or each rank in a collective, as `osdp calibrate` measures them); how they slow
// down when compute and communication overlap follows from the sharing (core_rate).
//
// A rank's compute thread keeps its core until the operating system's scheduler tick (1/HZ:
// 4 ms on a kernel built with HZ=250) when a communication thread is woken and no core is
// free: a collective issued while every core of its node computes starts at the next tick
// (testbed traces: in-step all-gathers of 260-525 KB took one tick each while both ranks
// computed, 0.2-0.5 ms while one of them waited). 0: no tick (the collective starts at once).
//
// With more ranks than cores the operating system does not share the cores evenly over a step:
// some rank is behind at its end. step_straggling is the slowest rank's compute of a whole step
// over the mean, every rank computing on its own (`osdp calibrate`; median over its probe
// steps); ranks that meet only at the step's end wait for that rank (model/parallel_iteration).
// 1: even.
struct HostCores {
  int cores = 1;
  double scheduler_tick_s = 0;
  double step_straggling = 1;
};

// A node's host side as CPU offload uses it (`"host": {"memory": "1TiB", "memory_bandwidth":
// "100GB/s", "optimizer_bandwidth": "50GB/s", "link": {"bandwidth": "25GB/s", "latency":
// "10us"}}`): offloaded states live in its memory, each GPU copies shards to and from it, and
// its CPU runs the offloaded optimizer step. Defaults are a PCIe 4.0 x16 server's.
struct HostMemory {
  // Per node; unset: not checked (the plan says so).
  std::optional<double> memory_bytes;
  // Each GPU <-> its host memory, where the topology does not route the copy itself (NVLink
  // and NVSwitch nodes; a PCIe tree's copies cross its GPU link and switch uplink).
  Link link{25e9, 10e-6};
  // Per node: the node's GPUs' copies and its CPU's update share it.
  double memory_bandwidth_Bps = 100e9;
  // Bytes of offloaded optimizer states (parameters, gradients, moments) the node's CPU update
  // reads and writes per second, each once (CPU Adam), shared by the node's ranks.
  double optimizer_bandwidth_Bps = 50e9;
};

struct Cluster {
  std::string name = "cluster";
  int ranks = 1;
  int gpus_per_node = 1;  // the HSDP shard group
  Gpu gpu;
  std::optional<HostCores> host_cores;  // only for ranks that compute on the host's CPU
  HostMemory host;                      // for CPU offload
  std::optional<Topology> topology;
  GroupTiming world;       // all ranks
  GroupTiming intra_node;  // the ranks of one node
  GroupTiming inter_node;  // one rank per node, all local ranks' groups running at once
  // Clusters without a topology (CPU ranks): the timings of a group of k ranks, k below the
  // cluster's ranks, while every such group of the node runs its own at once (`osdp calibrate`
  // times pairs: on shared cores a group's ring steps need not cost what the world's do; on the
  // 2-core testbed a pair's step came out as long as the world's). Sizes not listed take
  // `world`'s.
  std::map<int, GroupTiming> timing_by_group_size;
  // `"collectives": "nccl"` (clusters with a topology): NCCL's algorithm and protocol choice.
  CollectiveLibrary collectives = CollectiveLibrary::ring;

  int nodes() const { return ranks / gpus_per_node; }
  // The timings of a group of `group_ranks` ranks of a cluster without a topology.
  const GroupTiming& group_timing(int group_ranks) const;
};

// The speed of a busy thread of a node with shared cores when `busy_threads` run there, relative
// to its speed with one busy thread per rank of the node (what the laws were measured at):
// min(1, cores / busy) over min(1, cores / ranks per node). 1 without shared cores.
double core_rate(const Cluster& cluster, int busy_threads);
// How many times slower compute and communication both run while they overlap on every rank
// of a node (two busy threads a rank) than alone (one): 1 without shared cores, at most 2.
double shared_core_overlap_slowdown(const Cluster& cluster);

// Seconds to copy `bytes` between one GPU and its host memory while every GPU of the node copies
// as much at once (ranks move in step): the narrowest of the GPU's path (a PCIe tree's GPU link
// and its share of the switch uplink, else the host link) and its share of the host's memory
// bandwidth, plus the path's latency. 0 on ranks that compute on the host (one memory).
double host_copy_s(const Cluster& cluster, double bytes);

// Ring alpha-beta of the world, intra-node and inter-node groups, derived from the ring
// bottleneck: alpha is the longest neighbour-to-neighbour path latency, beta the inverse of the
// narrowest bandwidth a ring flow gets when every ring edge is busy at once (rings are laid as
// NCCL does: neighbours on the fastest links, each shared uplink crossed once per direction).
struct DerivedTimings {
  AlphaBeta world;
  AlphaBeta intra_node;
  AlphaBeta inter_node;
  double world_inter_alpha_share = 0;  // of world.alpha_s, the cross-node edges' part
};
DerivedTimings derive_timings(const Topology& topology);

// A group's timing at `alpha_beta`, with NCCL's choice on top where the cluster declares it:
// the group spans `nodes` nodes and `inter_alpha_share` of its alpha is cross-node edges'.
GroupTiming group_timing_for(const Cluster& cluster, AlphaBeta alpha_beta, int nodes,
                             double inter_alpha_share);
// The world, intra-node and inter-node timings of cluster.topology (which it must have).
void derive_group_timings(Cluster& cluster);

// Ring alpha-beta of one group among many alike that run at once (a tensor-, data- or
// pipeline-parallel group of a 3D layout, model/parallel_layout.hpp): `members_per_node` of its
// ranks on each of `nodes` nodes, every GPU of those nodes in one such group. Inside a node the
// node's ring; across nodes the ring leaves and enters each node once, and the groups that share
// a node share its NICs (NCCL spreads a ring's channels over several NICs when it has them
// alone). One node: the intra-node timing.
AlphaBeta group_ring_timing(const Topology& topology, int members_per_node, int nodes);
// That ring's timing and, of its per-step latency, the part its cross-node edges make up (0 on
// one node: what NCCL's protocol choice scales by the network's ratios), from one layout of it.
struct GroupRingTiming {
  AlphaBeta alpha_beta;
  double inter_alpha_share = 0;
};
GroupRingTiming group_ring(const Topology& topology, int members_per_node, int nodes);
// The narrowest bandwidth the ring of group `which` gets inside one node while the rings of every
// group in `groups` run at once (the groups of one kind of a 3D layout: each a list of the local
// GPUs, 0 to gpus - 1, it holds on that node, ascending). Each ring edge takes its route through
// the node's fabric and every link it crosses is shared equally by the edges that cross it in
// the same direction (both directions on half-duplex links). `closes_in_node`: the ring returns
// from its last GPU to its first inside the node (false: it leaves and re-enters through the
// NICs, which group_ring_timing times). Only a PCIe tree's switch uplinks and inter-socket links
// are shared by different GPUs' edges; NVLink and NVSwitch nodes give every GPU its own links,
// so there it is group_ring_timing's bandwidth (infinity when no edge crosses a link).
double shared_ring_bandwidth_Bps(const Topology& topology,
                                 const std::vector<std::vector<int>>& groups, std::size_t which,
                                 bool closes_in_node);
// One point-to-point transfer between two GPUs of different nodes while `senders_per_node` GPUs
// of the node send one at once (a pipeline stage's ranks on that node; 0: every GPU of the
// node): latency and the bandwidth each gets of its NICs. Same node: the node's GPU link.
AlphaBeta point_to_point_timing(const Topology& topology, bool across_nodes,
                                int senders_per_node = 0);

}  // namespace osdp
