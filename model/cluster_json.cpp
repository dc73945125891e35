// Reading and writing a cluster: GPU, topology, collective timings (SI units once, here).
#include "model/cluster_json.hpp"

#include <fmt/format.h>

#include <charconv>
#include <map>

#include "model/limits.hpp"
#include "model/units.hpp"
#include "model/workload.hpp"  // operator kinds name the compute laws

namespace osdp {
namespace {

using units::Dimension;

Link read_link(const JsonReader& reader) {
  reader.require_only({"bandwidth", "latency"});
  return {reader.quantity("bandwidth", Dimension::bytes_per_second, limits::bandwidth_Bps),
          reader.quantity("latency", Dimension::seconds, limits::latency_s)};
}

AlphaBeta read_alpha_beta(const JsonReader& reader) {
  AlphaBeta result;
  if (reader.has("alpha_s") && reader.has("alpha"))
    reader.fail("alpha", "only one of alpha, alpha_s");
  if (reader.has("alpha_s")) result.alpha_s = reader.number("alpha_s", limits::latency_s);
  if (reader.has("alpha")) {
    result.alpha_s = reader.quantity("alpha", Dimension::seconds, limits::latency_s);
  }
  if (reader.has("beta_s_per_byte") && reader.has("bandwidth")) {
    reader.fail("bandwidth", "only one of beta_s_per_byte, bandwidth");
  }
  if (reader.has("beta_s_per_byte")) {
    result.beta_s_per_byte = reader.number("beta_s_per_byte", limits::beta_s_per_byte);
  } else if (reader.has("bandwidth")) {
    result.beta_s_per_byte =
        1.0 / reader.quantity("bandwidth", Dimension::bytes_per_second, limits::bandwidth_Bps);
  } else {
    reader.fail("beta_s_per_byte", "beta_s_per_byte (seconds per byte) or a bandwidth");
  }
  return result;
}

CollectiveTiming read_collective_timing(const JsonReader& reader) {
  reader.require_only({"alpha", "alpha_s", "beta_s_per_byte", "bandwidth", "by_size"});
  CollectiveTiming timing;
  timing.alpha_beta = read_alpha_beta(reader);
  if (reader.has("by_size")) {
    for (const auto& entry : reader.objects("by_size")) {
      entry.require_only({"min_step_bytes", "alpha", "alpha_s", "beta_s_per_byte", "bandwidth"});
      timing.by_size.push_back(
          {entry.quantity("min_step_bytes", Dimension::bytes, limits::operator_bytes),
           read_alpha_beta(entry)});
    }
  }
  return timing;
}

// {"alpha_s", "beta_s_per_byte"} for all three collectives, with optional per-collective
// overrides {"all_gather": {...}, "reduce_scatter": {...}, "all_reduce": {...}}.
GroupTiming read_group_timing(const JsonReader& reader) {
  reader.require_only({"alpha", "alpha_s", "beta_s_per_byte", "bandwidth", "all_gather",
                       "reduce_scatter", "all_reduce"});
  GroupTiming group;
  const bool has_default = reader.has("alpha") || reader.has("alpha_s") ||
                           reader.has("beta_s_per_byte") || reader.has("bandwidth");
  if (has_default) group = GroupTiming::uniform(read_alpha_beta(reader));
  const std::array<std::pair<const char*, CollectiveTiming*>, 3> kinds{{
      {"all_gather", &group.all_gather},
      {"reduce_scatter", &group.reduce_scatter},
      {"all_reduce", &group.all_reduce},
  }};
  for (const auto& [key, timing] : kinds) {
    if (reader.has(key)) {
      *timing = read_collective_timing(reader.object(key));
    } else if (!has_default) {
      reader.fail(key, "alpha_s and beta_s_per_byte for all collectives, or for this one");
    }
  }
  return group;
}

Topology read_topology(const JsonReader& reader) {
  reader.require_only({"kind", "nodes", "gpus_per_node", "gpu_link", "pcie", "nics_per_node", "nic",
                       "fabric", "split_duplex"});
  Topology topology;
  const std::string kind = reader.choice("kind", {"pcie", "nvlink_mesh", "nvswitch"});
  topology.node.kind = kind == "pcie"          ? NodeKind::pcie
                       : kind == "nvlink_mesh" ? NodeKind::nvlink_mesh
                                               : NodeKind::nvswitch;
  topology.nodes = static_cast<int>(reader.optional_integer("nodes", 1, 1 << 20).value_or(1));
  topology.node.gpus = static_cast<int>(reader.integer("gpus_per_node", 1, 1 << 12));
  topology.node.gpu_link = read_link(reader.object("gpu_link"));
  if (topology.node.kind == NodeKind::pcie) {
    PcieTree& tree = topology.node.pcie;
    tree.gpu_link = topology.node.gpu_link;
    if (reader.has("pcie")) {
      const JsonReader pcie = reader.object("pcie");
      pcie.require_only({"sockets", "switches_per_socket", "switch_uplink", "inter_socket"});
      tree.sockets = static_cast<int>(pcie.optional_integer("sockets", 1, 64).value_or(1));
      tree.switches_per_socket =
          static_cast<int>(pcie.optional_integer("switches_per_socket", 1, 256).value_or(1));
      tree.switch_uplink =
          pcie.has("switch_uplink") ? read_link(pcie.object("switch_uplink")) : tree.gpu_link;
      tree.inter_socket =
          pcie.has("inter_socket") ? read_link(pcie.object("inter_socket")) : tree.switch_uplink;
    } else {
      tree.switch_uplink = tree.gpu_link;
      tree.inter_socket = tree.gpu_link;
    }
    const int switches = tree.sockets * tree.switches_per_socket;
    if (topology.node.gpus % switches != 0) {
      reader.fail("gpus_per_node",
                  fmt::format("a multiple of sockets x switches_per_socket = {}", switches));
    }
    tree.gpus_per_switch = topology.node.gpus / switches;
  } else if (reader.has("pcie")) {
    reader.fail("pcie", "no pcie block unless kind is \"pcie\"");
  }
  if (topology.nodes > 1) {
    if (!reader.has("nic"))
      reader.fail("nic", "a NIC link {bandwidth, latency} for a multi-node cluster");
    topology.nic = read_link(reader.object("nic"));
    topology.nics_per_node = static_cast<int>(
        reader.optional_integer("nics_per_node", 1, topology.node.gpus).value_or(1));
  } else if (reader.has("nic")) {
    // One node with its NICs described: a job on more GPUs than the node has (a measured
    // table's multi-node rows) scales it out to nodes of the same kind.
    topology.nic = read_link(reader.object("nic"));
    topology.nics_per_node = static_cast<int>(
        reader.optional_integer("nics_per_node", 1, topology.node.gpus).value_or(1));
  } else if (reader.has("nics_per_node")) {
    reader.fail("nics_per_node", "a \"nic\" link beside it");
  }
  if (reader.has("fabric")) {
    if (topology.nodes <= 1) reader.fail("fabric", "no fabric between nodes unless nodes > 1");
    topology.leaf_spine = read_fabric(reader.object("fabric"), topology.nodes);
  }
  topology.split_duplex = reader.optional_boolean("split_duplex").value_or(true);
  if (static_cast<long long>(topology.nodes) * topology.node.gpus > (1LL << 20)) {
    reader.fail("nodes", "at most 1,048,576 GPUs in all (nodes x gpus_per_node)");
  }
  return topology;
}

ComputeLaw read_compute_law(const JsonReader& reader, std::optional<double> peak_flops_per_s) {
  reader.require_only({"fixed", "rate", "score_rate", "score_row", "host_floor", "extra_slice",
                       "activation_bandwidth"});
  ComputeLaw law;
  law.fixed_s =
      reader.optional_quantity("fixed", Dimension::seconds, limits::latency_s).value_or(0.0);
  law.flops_per_s =
      reader.optional_quantity("rate", Dimension::flops_per_second, limits::compute_flops_per_s);
  if (law.flops_per_s && peak_flops_per_s && *law.flops_per_s > *peak_flops_per_s) {
    reader.fail_value(
        "rate", fmt::format("{:.6g} FLOP/s", *law.flops_per_s),
        fmt::format("at most the GPU's peak_compute ({:.6g} FLOP/s)", *peak_flops_per_s));
  }
  law.score_flops_per_s = reader.optional_quantity("score_rate", Dimension::flops_per_second,
                                                   limits::compute_flops_per_s);
  if (law.score_flops_per_s && peak_flops_per_s && *law.score_flops_per_s > *peak_flops_per_s) {
    reader.fail_value(
        "score_rate", fmt::format("{:.6g} FLOP/s", *law.score_flops_per_s),
        fmt::format("at most the GPU's peak_compute ({:.6g} FLOP/s)", *peak_flops_per_s));
  }
  law.score_row_s = reader.optional_quantity("score_row", Dimension::seconds, limits::latency_s);
  law.host_floor_s =
      reader.optional_quantity("host_floor", Dimension::seconds, limits::latency_s).value_or(0.0);
  law.extra_slice_s =
      reader.optional_quantity("extra_slice", Dimension::seconds, limits::latency_s);
  law.activation_bytes_per_s = reader.optional_quantity(
      "activation_bandwidth", Dimension::bytes_per_second, limits::bandwidth_Bps);
  return law;
}

// {"attention": {"forward": {"fixed": "0.2ms", "rate": "40GFLOP/s"}, "backward": {...}}, ...}
std::map<std::string, OperatorCompute, std::less<>> read_operator_compute(
    const JsonReader& reader, std::optional<double> peak_flops_per_s) {
  std::vector<std::string> kinds;
  for (OperatorKind kind : {OperatorKind::embedding, OperatorKind::attention, OperatorKind::mlp,
                            OperatorKind::head, OperatorKind::generic}) {
    kinds.emplace_back(operator_kind_name(kind));
  }
  reader.require_only(kinds);
  std::map<std::string, OperatorCompute, std::less<>> laws;
  for (const std::string& kind : kinds) {
    if (!reader.has(kind)) continue;
    const JsonReader entry = reader.object(kind);
    entry.require_only({"forward", "backward"});
    OperatorCompute compute;
    if (entry.has("forward")) {
      compute.forward = read_compute_law(entry.object("forward"), peak_flops_per_s);
    }
    if (entry.has("backward")) {
      compute.backward = read_compute_law(entry.object("backward"), peak_flops_per_s);
    }
    laws[kind] = compute;
  }
  return laws;
}

// {"probe": {"layers": 2, "hidden": 320, "heads": 4, "sequence_length": 128, "vocabulary":
// 2048}, "batch_size": 4, "compute": "21.5ms"}
SpeedReference read_speed_reference(const JsonReader& reader) {
  reader.require_only({"probe", "batch_size", "compute"});
  const JsonReader probe = reader.object("probe");
  probe.require_only({"layers", "hidden", "heads", "sequence_length", "vocabulary"});
  SpeedReference reference;
  ProbeShape& shape = reference.probe;
  shape.layers = static_cast<int>(probe.integer("layers", 1, 1 << 16));
  shape.hidden = static_cast<int>(probe.integer("hidden", 1, 1 << 20));
  shape.heads = static_cast<int>(probe.integer("heads", 1, 1 << 16));
  shape.sequence_length = static_cast<int>(probe.integer("sequence_length", 1, 1 << 24));
  shape.vocabulary = static_cast<int>(probe.integer("vocabulary", 1, 1 << 24));
  reference.batch_size = static_cast<int>(reader.integer("batch_size", 1, 1 << 16));
  reference.compute_s =
      reader.quantity("compute", Dimension::seconds, Range{1e-9, 3600, "a probe's compute time"});
  return reference;
}

Gpu read_gpu(const JsonReader& reader) {
  reader.require_only({"name", "memory", "compute", "peak_compute", "memory_bandwidth",
                       "optimizer_bandwidth", "kernel_launch", "overlap_slowdown",
                       "straggler_slowdown", "pipeline_pass", "blocking_sync", "fp8_speedup",
                       "operator_compute", "speed_reference"});
  Gpu gpu;
  gpu.name = reader.optional_name("name").value_or("gpu");
  gpu.memory_bytes = reader.optional_quantity("memory", Dimension::bytes, limits::gpu_memory_bytes);
  gpu.compute_flops_per_s =
      reader.optional_quantity("compute", Dimension::flops_per_second, limits::compute_flops_per_s);
  gpu.peak_flops_per_s = reader.optional_quantity("peak_compute", Dimension::flops_per_second,
                                                  limits::compute_flops_per_s);
  if (gpu.compute_flops_per_s && gpu.peak_flops_per_s &&
      *gpu.compute_flops_per_s > *gpu.peak_flops_per_s) {
    reader.fail_value("compute", fmt::format("{:.6g} FLOP/s", *gpu.compute_flops_per_s),
                      fmt::format("a sustained rate at most the peak_compute ({:.6g} FLOP/s)",
                                  *gpu.peak_flops_per_s));
  }
  gpu.memory_bandwidth_Bps = reader.optional_quantity(
      "memory_bandwidth", Dimension::bytes_per_second, limits::bandwidth_Bps);
  gpu.optimizer_bandwidth_Bps = reader.optional_quantity(
      "optimizer_bandwidth", Dimension::bytes_per_second, limits::bandwidth_Bps);
  gpu.kernel_launch_s =
      reader.optional_quantity("kernel_launch", Dimension::seconds, limits::latency_s)
          .value_or(5e-6);
  gpu.overlap_slowdown =
      reader.optional_number("overlap_slowdown", limits::slowdown).value_or(gpu.overlap_slowdown);
  gpu.straggler_slowdown = reader.optional_number("straggler_slowdown", limits::slowdown)
                               .value_or(gpu.straggler_slowdown);
  gpu.pipeline_pass_s =
      reader.optional_quantity("pipeline_pass", Dimension::seconds, limits::latency_s)
          .value_or(0.0);
  gpu.blocking_sync_s =
      reader.optional_quantity("blocking_sync", Dimension::seconds, limits::latency_s)
          .value_or(0.0);
  gpu.fp8_speedup = reader.optional_number("fp8_speedup", Range{1, 4, "an fp8 speedup"})
                        .value_or(gpu.fp8_speedup);
  if (reader.has("operator_compute")) {
    gpu.operator_compute =
        read_operator_compute(reader.object("operator_compute"), gpu.peak_flops_per_s);
  }
  if (reader.has("speed_reference")) {
    gpu.speed_reference = read_speed_reference(reader.object("speed_reference"));
  }
  return gpu;
}

// The offload side of "host": memory, its bandwidth, the CPU update's, the GPU's link to it.
HostMemory read_host_memory(const JsonReader& reader) {
  HostMemory host;
  host.memory_bytes =
      reader.optional_quantity("memory", Dimension::bytes, limits::host_memory_bytes);
  host.memory_bandwidth_Bps =
      reader
          .optional_quantity("memory_bandwidth", Dimension::bytes_per_second, limits::bandwidth_Bps)
          .value_or(host.memory_bandwidth_Bps);
  host.optimizer_bandwidth_Bps =
      reader
          .optional_quantity("optimizer_bandwidth", Dimension::bytes_per_second,
                             limits::bandwidth_Bps)
          .value_or(host.optimizer_bandwidth_Bps);
  if (reader.has("link")) host.link = read_link(reader.object("link"));
  return host;
}

// "host": {"cores": 2, "ranks_on_cores": true, "scheduler_tick": "4ms"} (with the offload keys
// beside them, or alone).
// The shared cores replace the fitted overlap slowdown: both at once would count the same
// contention twice.
std::optional<HostCores> read_host_cores(const JsonReader& reader, const Cluster& cluster) {
  if (!reader.has("cores") && !reader.has("ranks_on_cores")) return std::nullopt;
  const auto cores = static_cast<int>(reader.integer("cores", 1, 1 << 16));
  if (!reader.boolean("ranks_on_cores")) return std::nullopt;
  if (cluster.gpu.overlap_slowdown != 1.0) {
    reader.fail_value("ranks_on_cores", "true",
                      "no gpu.overlap_slowdown beside it (the shared cores make the slowdown of "
                      "overlapping compute and communication; remove overlap_slowdown)");
  }
  if (cluster.topology) {
    reader.fail_value("ranks_on_cores", "true",
                      "a cluster without a topology (CPU ranks: their collectives are the "
                      "calibrated \"collective\" timings)");
  }
  const double tick_s =
      reader.optional_quantity("scheduler_tick", Dimension::seconds, limits::latency_s)
          .value_or(0.0);
  const double step_straggling =
      reader.optional_number("step_straggling", limits::slowdown).value_or(1.0);
  return HostCores{cores, tick_s, step_straggling};
}

// The planner would cost collectives with the given timings and the simulator run them on the
// topology's links: two answers for one cluster. One source of timings, not both.
void refuse_timings_beside_topology(const JsonReader& reader) {
  for (const char* key : {"collective", "intra_node_collective", "inter_node_collective",
                          "collective_by_group_size"}) {
    if (!reader.has(key)) continue;
    reader.fail(key, fmt::format("either \"topology\" (the collective timings derived from its "
                                 "links) or \"{}\" (timings given), not both: remove one",
                                 key));
  }
}

// `"collective_by_group_size": {"2": {<group timing>}, ...}`: keys are group sizes from 2 to
// below the cluster's ranks.
std::map<int, GroupTiming> read_timing_by_group_size(const JsonReader& reader, int ranks) {
  const JsonReader by_size = reader.object("collective_by_group_size");
  std::map<int, GroupTiming> timings;
  for (const auto& [key, value] : reader.raw("collective_by_group_size").items()) {
    int size = 0;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), size);
    if (error != std::errc() || end != key.data() + key.size() || size < 2 || size >= ranks) {
      by_size.fail_value(key, key,
                         fmt::format("a group size from 2 to {} (below the cluster's {} ranks), "
                                     "as a string key such as \"2\"",
                                     ranks - 1, ranks));
    }
    timings[size] = read_group_timing(by_size.object(key));
  }
  return timings;
}

}  // namespace

Cluster load_cluster(const JsonReader& reader) {
  reader.require_only({"name", "ranks", "gpus_per_node", "gpu", "host", "topology", "collective",
                       "intra_node_collective", "inter_node_collective", "collective_by_group_size",
                       "collectives"});
  Cluster cluster;
  cluster.name = reader.optional_name("name").value_or("cluster");
  if (reader.has("collectives")) {
    if (reader.choice("collectives", {"ring", "nccl"}) == "nccl") {
      if (!reader.has("topology")) {
        reader.fail("collectives",
                    "\"nccl\" only with a \"topology\" (NCCL's choice is made "
                    "from its links)");
      }
      cluster.collectives = CollectiveLibrary::nccl;
    }
  }
  if (reader.has("gpu")) cluster.gpu = read_gpu(reader.object("gpu"));
  if (reader.has("topology")) {
    refuse_timings_beside_topology(reader);
    const Topology topology = read_topology(reader.object("topology"));
    cluster.topology = topology;
    cluster.ranks = topology.ranks();
    cluster.gpus_per_node = topology.node.gpus;
    if (reader.has("ranks") && reader.integer("ranks", 1, 1 << 20) != cluster.ranks) {
      reader.fail("ranks", fmt::format("the topology's rank count, nodes x gpus_per_node = {}",
                                       cluster.ranks));
    }
    if (reader.has("gpus_per_node")) reader.fail("gpus_per_node", "gpus_per_node inside topology");
    derive_group_timings(cluster);
  } else {
    cluster.ranks = static_cast<int>(reader.integer("ranks", 1, 1 << 20));
    cluster.gpus_per_node = static_cast<int>(
        reader.optional_integer("gpus_per_node", 1, cluster.ranks).value_or(cluster.ranks));
    if (cluster.ranks % cluster.gpus_per_node != 0) {
      reader.fail("gpus_per_node", fmt::format("a divisor of ranks ({})", cluster.ranks));
    }
    if (!reader.has("collective")) {
      reader.fail("collective", "collective timing {alpha_s, beta_s_per_byte} or a topology");
    }
  }
  if (reader.has("collective")) {
    cluster.world = read_group_timing(reader.object("collective"));
    if (!cluster.topology) {
      cluster.intra_node = cluster.world;
      cluster.inter_node = cluster.world;
    }
  }
  if (reader.has("intra_node_collective")) {
    cluster.intra_node = read_group_timing(reader.object("intra_node_collective"));
  }
  if (reader.has("inter_node_collective")) {
    cluster.inter_node = read_group_timing(reader.object("inter_node_collective"));
  }
  if (reader.has("collective_by_group_size")) {
    cluster.timing_by_group_size = read_timing_by_group_size(reader, cluster.ranks);
  }
  if (reader.has("host")) {
    const JsonReader host = reader.object("host");
    host.require_only({"cores", "ranks_on_cores", "scheduler_tick", "step_straggling", "memory",
                       "memory_bandwidth", "optimizer_bandwidth", "link"});
    cluster.host_cores = read_host_cores(host, cluster);
    cluster.host = read_host_memory(host);
  }
  return cluster;
}

namespace {

Json alpha_beta_json(const CollectiveTiming& timing) {
  Json json = {{"alpha_s", timing.alpha_beta.alpha_s},
               {"beta_s_per_byte", timing.alpha_beta.beta_s_per_byte}};
  if (!timing.by_size.empty()) {
    Json segments = Json::array();
    for (const auto& segment : timing.by_size) {
      segments.push_back({{"min_step_bytes", segment.min_step_bytes},
                          {"alpha_s", segment.alpha_beta.alpha_s},
                          {"beta_s_per_byte", segment.alpha_beta.beta_s_per_byte}});
    }
    json["by_size"] = std::move(segments);
  }
  return json;
}

Json group_json(const GroupTiming& group) {
  return {{"all_gather", alpha_beta_json(group.all_gather)},
          {"reduce_scatter", alpha_beta_json(group.reduce_scatter)},
          {"all_reduce", alpha_beta_json(group.all_reduce)}};
}

}  // namespace

Json probe_shape_json(const ProbeShape& probe) {
  return {{"layers", probe.layers},
          {"hidden", probe.hidden},
          {"heads", probe.heads},
          {"sequence_length", probe.sequence_length},
          {"vocabulary", probe.vocabulary}};
}

Json cluster_to_json(const Cluster& cluster) {
  Json gpu = {{"name", cluster.gpu.name}, {"kernel_launch", cluster.gpu.kernel_launch_s}};
  if (!cluster.host_cores || cluster.gpu.overlap_slowdown != 1.0) {
    gpu["overlap_slowdown"] = cluster.gpu.overlap_slowdown;
  }
  if (cluster.gpu.pipeline_pass_s > 0) gpu["pipeline_pass"] = cluster.gpu.pipeline_pass_s;
  if (cluster.gpu.blocking_sync_s > 0) gpu["blocking_sync"] = cluster.gpu.blocking_sync_s;
  if (cluster.gpu.fp8_speedup != 1.0) gpu["fp8_speedup"] = cluster.gpu.fp8_speedup;
  if (cluster.gpu.straggler_slowdown != 1.0) {
    gpu["straggler_slowdown"] = cluster.gpu.straggler_slowdown;
  }
  if (cluster.gpu.memory_bytes) gpu["memory"] = *cluster.gpu.memory_bytes;
  if (cluster.gpu.compute_flops_per_s) gpu["compute"] = *cluster.gpu.compute_flops_per_s;
  if (cluster.gpu.peak_flops_per_s) gpu["peak_compute"] = *cluster.gpu.peak_flops_per_s;
  if (cluster.gpu.memory_bandwidth_Bps) gpu["memory_bandwidth"] = *cluster.gpu.memory_bandwidth_Bps;
  if (cluster.gpu.optimizer_bandwidth_Bps) {
    gpu["optimizer_bandwidth"] = *cluster.gpu.optimizer_bandwidth_Bps;
  }
  if (!cluster.gpu.operator_compute.empty()) {
    Json laws = Json::object();
    for (const auto& [kind, compute] : cluster.gpu.operator_compute) {
      auto law_json = [](const ComputeLaw& law) {
        Json json = {{"fixed", law.fixed_s}};
        if (law.flops_per_s) json["rate"] = *law.flops_per_s;
        if (law.score_flops_per_s) json["score_rate"] = *law.score_flops_per_s;
        if (law.score_row_s) json["score_row"] = *law.score_row_s;
        if (law.host_floor_s > 0) json["host_floor"] = law.host_floor_s;
        if (law.extra_slice_s) json["extra_slice"] = *law.extra_slice_s;
        if (law.activation_bytes_per_s) json["activation_bandwidth"] = *law.activation_bytes_per_s;
        return json;
      };
      laws[kind] = {{"forward", law_json(compute.forward)},
                    {"backward", law_json(compute.backward)}};
    }
    gpu["operator_compute"] = std::move(laws);
  }
  if (const auto& reference = cluster.gpu.speed_reference) {
    gpu["speed_reference"] = {{"probe", probe_shape_json(reference->probe)},
                              {"batch_size", reference->batch_size},
                              {"compute", reference->compute_s}};
  }
  Json json = {{"name", cluster.name},
               {"ranks", cluster.ranks},
               {"gpus_per_node", cluster.gpus_per_node},
               {"gpu", gpu},
               {"collective", group_json(cluster.world)}};
  const HostMemory& host = cluster.host;
  Json host_json = {
      {"memory_bandwidth", host.memory_bandwidth_Bps},
      {"optimizer_bandwidth", host.optimizer_bandwidth_Bps},
      {"link", {{"bandwidth", host.link.bandwidth_Bps}, {"latency", host.link.latency_s}}}};
  if (host.memory_bytes) host_json["memory"] = *host.memory_bytes;
  if (cluster.host_cores) {
    host_json["cores"] = cluster.host_cores->cores;
    host_json["ranks_on_cores"] = true;
    if (cluster.host_cores->scheduler_tick_s > 0) {
      host_json["scheduler_tick"] = cluster.host_cores->scheduler_tick_s;
    }
    if (cluster.host_cores->step_straggling != 1.0) {
      host_json["step_straggling"] = cluster.host_cores->step_straggling;
    }
  }
  json["host"] = std::move(host_json);
  if (!cluster.timing_by_group_size.empty()) {
    Json by_size = Json::object();
    for (const auto& [size, timing] : cluster.timing_by_group_size) {
      by_size[std::to_string(size)] = group_json(timing);
    }
    json["collective_by_group_size"] = std::move(by_size);
  }
  if (cluster.nodes() > 1) {
    json["intra_node_collective"] = group_json(cluster.intra_node);
    json["inter_node_collective"] = group_json(cluster.inter_node);
  }
  return json;
}

}  // namespace osdp
