#include "model/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/mode.hpp"

namespace osdp {
namespace {

// The schedule keys of a scenario's "simulation" object, for the cost model to predict the
// iteration the simulator runs (sim/options reads the whole object strictly).
CostSettings::Overlap read_overlap_schedule(const JsonReader& reader) {
  CostSettings::Overlap schedule;
  schedule.forward_prefetch = reader.optional_integer("forward_prefetch", 0, 64).value_or(1) > 0;
  schedule.backward_prefetch = read_backward_prefetch(reader, "backward_prefetch");
  schedule.separate_reduction_lane =
      reader.optional_boolean("separate_reduce_scatter_lane").value_or(false);
  schedule.all_reduce_after_backward =
      reader.has("gradient_all_reduce") &&
      reader.choice("gradient_all_reduce", {"per_operator", "after_backward"}) == "after_backward";
  schedule.slowdown = reader.optional_number("overlap_slowdown", limits::slowdown);
  schedule.kernel_launch_s =
      reader.optional_quantity("kernel_launch", units::Dimension::seconds, false);
  return schedule;
}

namespace fs = std::filesystem;
using units::Dimension;

// Splits "a,b,c".
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

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
    topology.nic = read_link(reader.object("nic"));
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
  reader.require_only({"fixed", "rate", "host_floor", "extra_slice"});
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
  law.host_floor_s =
      reader.optional_quantity("host_floor", Dimension::seconds, limits::latency_s).value_or(0.0);
  law.extra_slice_s =
      reader.optional_quantity("extra_slice", Dimension::seconds, limits::latency_s);
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

Gpu read_gpu(const JsonReader& reader) {
  reader.require_only({"name", "memory", "compute", "peak_compute", "memory_bandwidth",
                       "optimizer_bandwidth", "kernel_launch", "overlap_slowdown",
                       "straggler_slowdown", "operator_compute"});
  Gpu gpu;
  gpu.name = reader.optional_string("name").value_or("gpu");
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
  if (reader.has("operator_compute")) {
    gpu.operator_compute =
        read_operator_compute(reader.object("operator_compute"), gpu.peak_flops_per_s);
  }
  return gpu;
}

OperatorKind read_operator_kind(const JsonReader& reader) {
  const std::string kind =
      reader.choice("kind", {"embedding", "attention", "mlp", "head", "generic"});
  for (OperatorKind candidate : {OperatorKind::embedding, OperatorKind::attention,
                                 OperatorKind::mlp, OperatorKind::head, OperatorKind::generic}) {
    if (operator_kind_name(candidate) == kind) return candidate;
  }
  return OperatorKind::generic;
}

Operator read_operator(const JsonReader& reader, const Training& training) {
  reader.require_only({"name", "kind", "parameter_count", "parameter_bytes", "model_state_bytes",
                       "gradient_bytes", "optimizer_bytes", "activation_bytes_per_sample",
                       "input_activation_bytes_per_sample", "output_bytes_per_sample",
                       "extra_bytes", "workspace_bytes_per_sample", "compute_s_per_sample",
                       "forward_compute_s_per_sample", "forward_flops_per_sample",
                       "backward_flops_per_sample", "splittable", "inputs"});
  Operator op;
  op.name = reader.string("name");
  if (op.name.empty()) reader.fail("name", "a non-empty operator name");
  if (reader.has("kind")) op.kind = read_operator_kind(reader);
  const BytesPerParameter per_parameter =
      bytes_per_parameter(training.precision, training.optimizer);
  if (reader.has("parameter_bytes")) {
    op.parameter_bytes =
        reader.quantity("parameter_bytes", Dimension::bytes, limits::operator_bytes);
    op.parameter_count = reader.has("parameter_count")
                             ? reader.number("parameter_count", limits::parameter_count)
                             : op.parameter_bytes / per_parameter.parameter;
  } else if (reader.has("parameter_count")) {
    op.parameter_count = reader.number("parameter_count", limits::parameter_count);
    op.parameter_bytes = op.parameter_count * per_parameter.parameter;
  } else {
    reader.fail("parameter_bytes", "parameter_bytes (S_i) or parameter_count");
  }
  // Gradients as large as the parameters, the rest of the model states in the optimizer.
  op.gradient_bytes =
      reader.has("gradient_bytes")
          ? reader.quantity("gradient_bytes", Dimension::bytes, limits::operator_bytes)
          : op.parameter_count * per_parameter.gradient;
  if (!reader.has("gradient_bytes") && reader.has("parameter_bytes")) {
    op.gradient_bytes = op.parameter_bytes;
  }
  if (reader.has("model_state_bytes")) {
    if (reader.has("optimizer_bytes")) {
      reader.fail("optimizer_bytes", "either model_state_bytes or optimizer_bytes, not both");
    }
    const double states =
        reader.quantity("model_state_bytes", Dimension::bytes, limits::operator_bytes);
    op.optimizer_bytes = states - op.parameter_bytes - op.gradient_bytes;
    if (op.optimizer_bytes < 0) {
      reader.fail("model_state_bytes", fmt::format("at least parameter + gradient bytes ({:.0f})",
                                                   op.parameter_bytes + op.gradient_bytes));
    }
  } else if (reader.has("optimizer_bytes")) {
    op.optimizer_bytes =
        reader.quantity("optimizer_bytes", Dimension::bytes, limits::operator_bytes);
  } else {
    op.optimizer_bytes = op.parameter_count * per_parameter.optimizer;
  }
  op.activation_bytes_per_sample =
      reader.quantity("activation_bytes_per_sample", Dimension::bytes, limits::operator_bytes);
  if (reader.has("input_activation_bytes_per_sample")) {
    op.input_activation_bytes_per_sample = reader.quantity(
        "input_activation_bytes_per_sample", Dimension::bytes, limits::operator_bytes);
    if (*op.input_activation_bytes_per_sample > op.activation_bytes_per_sample) {
      reader.fail("input_activation_bytes_per_sample",
                  "at most activation_bytes_per_sample (the input is part of what is saved)");
    }
  }
  op.output_bytes_per_sample =
      reader.optional_quantity("output_bytes_per_sample", Dimension::bytes, limits::operator_bytes)
          .value_or(0);
  op.extra_bytes =
      reader.optional_quantity("extra_bytes", Dimension::bytes, limits::operator_bytes).value_or(0);
  op.workspace_bytes_per_sample =
      reader
          .optional_quantity("workspace_bytes_per_sample", Dimension::bytes, limits::operator_bytes)
          .value_or(0);
  op.compute_s_per_sample = reader.optional_quantity("compute_s_per_sample", Dimension::seconds,
                                                     limits::compute_s_per_sample);
  op.forward_compute_s_per_sample = reader.optional_quantity(
      "forward_compute_s_per_sample", Dimension::seconds, limits::compute_s_per_sample);
  if (op.forward_compute_s_per_sample && op.compute_s_per_sample &&
      *op.forward_compute_s_per_sample > *op.compute_s_per_sample) {
    reader.fail("forward_compute_s_per_sample",
                "at most compute_s_per_sample (forward + backward)");
  }
  op.forward_flops_per_sample =
      reader.optional_number("forward_flops_per_sample", limits::flops_per_sample).value_or(0);
  op.backward_flops_per_sample =
      reader.optional_number("backward_flops_per_sample", limits::flops_per_sample)
          .value_or(2 * op.forward_flops_per_sample);
  op.splittable = reader.optional_boolean("splittable").value_or(true);
  return op;
}

Workload read_operator_list(const JsonReader& reader, const Training& training) {
  reader.require_only({"name", "operators"});
  const std::string name = reader.optional_string("name").value_or("model");
  const auto entries = reader.objects("operators");
  if (entries.empty()) reader.fail("operators", "at least one operator");
  if (entries.size() > 1000000) reader.fail("operators", "at most 1,000,000 operators");
  std::vector<Operator> operators;
  operators.reserve(entries.size());
  for (const auto& entry : entries) {
    operators.push_back(read_operator(entry, training));
    for (std::size_t i = 0; i + 1 < operators.size(); ++i) {
      if (operators[i].name == operators.back().name) {
        entry.fail("name", "a name no other operator has");
      }
    }
  }
  // Edges: "inputs" names producers; an operator without "inputs" follows the one before it.
  bool any_inputs = false;
  for (const auto& entry : entries) any_inputs = any_inputs || entry.has("inputs");
  std::vector<std::pair<int, int>> edges;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const JsonReader& entry = entries[i];
    if (!entry.has("inputs")) {
      if (i > 0 && !any_inputs) edges.emplace_back(static_cast<int>(i - 1), static_cast<int>(i));
      continue;
    }
    const Json& inputs = entry.raw("inputs");
    if (!inputs.is_array()) entry.fail("inputs", "an array of operator names");
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const std::string path = fmt::format("inputs[{}]", k);
      if (!inputs[k].is_string())
        entry.fail_value(path, render_value(inputs[k]), "an operator name");
      const std::string producer = inputs[k].get<std::string>();
      int found = -1;
      for (std::size_t p = 0; p < operators.size(); ++p) {
        if (operators[p].name == producer) found = static_cast<int>(p);
      }
      if (found < 0) entry.fail_value(path, "\"" + producer + "\"", "the name of another operator");
      if (found == static_cast<int>(i))
        entry.fail_value(path, "\"" + producer + "\"", "another operator than itself");
      edges.emplace_back(found, static_cast<int>(i));
    }
  }
  return Workload(name, std::move(operators), std::move(edges), reader.file());
}

GptSpec read_gpt_spec(const JsonReader& reader) {
  reader.require_only({"family", "name", "layers", "hidden", "heads", "sequence_length",
                       "vocabulary", "vocabulary_multiple", "dropout"});
  GptSpec spec;
  spec.name = reader.optional_string("name").value_or("gpt");
  spec.layers = static_cast<int>(reader.integer("layers", 1, 100000));
  spec.heads = static_cast<int>(reader.integer("heads", 1, 1 << 16));
  spec.sequence_length =
      static_cast<int>(reader.optional_integer("sequence_length", 1, 1 << 24).value_or(1024));
  spec.vocabulary =
      static_cast<int>(reader.optional_integer("vocabulary", 1, 1 << 26).value_or(50257));
  spec.vocabulary_multiple =
      static_cast<int>(reader.optional_integer("vocabulary_multiple", 1, 1 << 16).value_or(1));
  if (reader.has("dropout")) {
    spec.dropout = reader.non_negative_number("dropout");
    if (spec.dropout >= 1) reader.fail("dropout", "a probability from 0 (no dropout) below 1");
  }
  const Json& hidden = reader.raw("hidden");
  spec.hidden_sizes.clear();
  if (hidden.is_array()) {
    if (static_cast<int>(hidden.size()) != spec.layers) {
      reader.fail("hidden",
                  fmt::format("one hidden size per layer ({} entries) or one number", spec.layers));
    }
    for (const auto& value : hidden) {
      if (!value.is_number_integer() || value.get<long long>() < 1 ||
          value.get<long long>() > (1 << 20)) {
        reader.fail("hidden", "hidden sizes that are integers from 1 to 1048576");
      }
      spec.hidden_sizes.push_back(value.get<int>());
    }
  } else {
    spec.hidden_sizes.push_back(static_cast<int>(reader.integer("hidden", 1, 1 << 20)));
  }
  for (int h : spec.hidden_sizes) {
    if (h % spec.heads != 0) {
      reader.fail_value("hidden", std::to_string(h),
                        fmt::format("a hidden size divisible by heads ({})", spec.heads));
    }
  }
  return spec;
}

// A key that holds an object or a path (relative to the scenario file) to a JSON file with it.
struct Included {
  Json document;
  std::string file;
};

Included include(const JsonReader& reader, const std::string& key) {
  const Json& value = reader.raw(key);
  if (value.is_string()) {
    fs::path path = value.get<std::string>();
    if (path.is_relative() && !reader.file().empty()) {
      path = fs::path(reader.file()).parent_path() / path;
    }
    // A symlink loop or a name too long is an input error, not a filesystem exception.
    std::error_code error;
    const bool exists = fs::exists(path, error);
    if (error) {
      reader.fail(key, "an object or the path of a readable JSON file (" + error.message() + ")");
    }
    if (!exists) reader.fail(key, "an object or the path of an existing JSON file");
    return {read_json_file(path.string()), path.string()};
  }
  if (!value.is_object()) reader.fail(key, "an object or the path of a JSON file");
  return {value, reader.file()};
}

// A memory limit above the GPU's own memory is a unit slip: no plan can use what is not there.
void check_memory_limit(const Scenario& scenario, const std::string& file) {
  const auto& limit = scenario.training.memory_limit_bytes;
  const auto& memory = scenario.cluster.gpu.memory_bytes;
  if (limit && memory && *limit > *memory) {
    throw InputError(file, "$.training.memory_limit", units::format_bytes(*limit),
                     fmt::format("at most the GPU's memory ({})", units::format_bytes(*memory)));
  }
}

// A fixed global batch must be reachable: some micro-batch of the range times the ranks divides it.
void check_global_batch(const Scenario& scenario, const std::string& file) {
  const Training& training = scenario.training;
  if (!training.global_batch_size) return;
  for (int b = training.min_batch_size; b <= training.max_batch_size; ++b) {
    if (training.accumulation_for(b, scenario.cluster.ranks)) return;
  }
  throw InputError(
      file, "$.training.global_batch_size", std::to_string(*training.global_batch_size),
      fmt::format("a multiple of micro-batch x {} ranks for some micro-batch in {}..{}",
                  scenario.cluster.ranks, training.min_batch_size, training.max_batch_size));
}

// Every input is within its range, but together they must still give finite, positive figures:
// an all-DP iteration at the smallest batch size is the reference (it always exists).
void check_figures_finite(const Scenario& scenario, const CostModel& costs,
                          const std::string& file) {
  Plan plan;
  plan.batch_size = scenario.training.min_batch_size;
  plan.choices.assign(scenario.workload->size(), OperatorChoice{});
  const PlanCost cost = costs.plan_cost(plan);
  const bool time_ok = std::isfinite(cost.iteration_time_s) && cost.iteration_time_s > 0.0;
  if (!time_ok) {
    throw InputError(file, "$.model",
                     fmt::format("an iteration time of {} s", cost.iteration_time_s),
                     "operators with some compute time, FLOPs or parameters, and cluster rates "
                     "that give a finite iteration time");
  }
  const bool memory_ok = std::isfinite(cost.peak_memory_bytes) && cost.peak_memory_bytes > 0.0;
  if (!memory_ok) {
    throw InputError(file, "$.model",
                     fmt::format("a peak memory of {} bytes", cost.peak_memory_bytes),
                     "operators with some parameters or activations (a finite, positive memory "
                     "need)");
  }
}

}  // namespace

std::optional<std::vector<Mode>> parse_modes(const std::string& text) {
  std::vector<Mode> modes;
  for (const auto& item : split_list(text)) {
    const auto mode = mode_from_name(item);
    if (!mode) return std::nullopt;
    bool seen = false;
    for (Mode existing : modes) seen = seen || existing == *mode;
    if (!seen) modes.push_back(*mode);
  }
  if (modes.empty()) return std::nullopt;
  return modes;
}

std::optional<std::vector<int>> parse_split(const std::string& text) {
  if (text == "auto") return std::vector<int>{1, 2, 4, 8};
  for (int k : {1, 2, 4, 8}) {
    if (text == std::to_string(k)) return k == 1 ? std::vector<int>{1} : std::vector<int>{1, k};
  }
  return std::nullopt;
}

std::optional<SearchSpec::CheckpointPolicy> parse_checkpoint_policy(const std::string& text) {
  if (text == "off") return SearchSpec::CheckpointPolicy::off;
  if (text == "on") return SearchSpec::CheckpointPolicy::on;
  if (text == "auto") return SearchSpec::CheckpointPolicy::automatic;
  return std::nullopt;
}

Cluster load_cluster(const JsonReader& reader) {
  reader.require_only({"name", "ranks", "gpus_per_node", "gpu", "topology", "collective",
                       "intra_node_collective", "inter_node_collective"});
  Cluster cluster;
  cluster.name = reader.optional_string("name").value_or("cluster");
  if (reader.has("gpu")) cluster.gpu = read_gpu(reader.object("gpu"));
  if (reader.has("topology")) {
    const Topology topology = read_topology(reader.object("topology"));
    cluster.topology = topology;
    cluster.ranks = topology.ranks();
    cluster.gpus_per_node = topology.node.gpus;
    if (reader.has("ranks") && reader.integer("ranks", 1, 1 << 20) != cluster.ranks) {
      reader.fail("ranks", fmt::format("the topology's rank count, nodes x gpus_per_node = {}",
                                       cluster.ranks));
    }
    if (reader.has("gpus_per_node")) reader.fail("gpus_per_node", "gpus_per_node inside topology");
    const DerivedTimings derived = derive_timings(topology);
    cluster.world = GroupTiming::uniform(derived.world);
    cluster.intra_node = GroupTiming::uniform(derived.intra_node);
    cluster.inter_node = GroupTiming::uniform(derived.inter_node);
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
  return cluster;
}

Training load_training(const JsonReader& reader) {
  reader.require_only({"precision", "optimizer", "memory_limit", "min_batch_size", "max_batch_size",
                       "micro_batch_size", "accumulation_steps", "global_batch_size",
                       "gradient_reduce"});
  Training training;
  if (reader.has("precision")) {
    training.precision = reader.choice("precision", {"fp32", "mixed"}) == "fp32" ? Precision::fp32
                                                                                 : Precision::mixed;
  }
  if (reader.has("optimizer")) {
    training.optimizer =
        reader.choice("optimizer", {"adam", "sgd"}) == "adam" ? Optimizer::adam : Optimizer::sgd;
  }
  training.memory_limit_bytes =
      reader.optional_quantity("memory_limit", Dimension::bytes, limits::memory_limit_bytes);
  if (reader.has("micro_batch_size")) {
    // A fixed micro-batch: the scheduler tries only it.
    for (const char* key : {"min_batch_size", "max_batch_size"}) {
      if (reader.has(key)) reader.fail(key, "either micro_batch_size or a batch-size range");
    }
    training.min_batch_size = static_cast<int>(reader.integer("micro_batch_size", 1, 1 << 20));
    training.max_batch_size = training.min_batch_size;
  } else {
    training.min_batch_size =
        static_cast<int>(reader.optional_integer("min_batch_size", 1, 1 << 20).value_or(1));
    training.max_batch_size =
        static_cast<int>(reader.optional_integer("max_batch_size", 1, 1 << 20).value_or(64));
  }
  if (training.max_batch_size < training.min_batch_size) {
    reader.fail("max_batch_size",
                fmt::format("at least min_batch_size ({})", training.min_batch_size));
  }
  training.accumulation_steps =
      static_cast<int>(reader.optional_integer("accumulation_steps", 1, 1 << 16).value_or(1));
  if (reader.has("global_batch_size")) {
    if (reader.has("accumulation_steps")) {
      reader.fail("global_batch_size",
                  "either global_batch_size (the scheduler chooses micro-batch and accumulation) "
                  "or accumulation_steps, not both");
    }
    training.global_batch_size = static_cast<int>(reader.integer("global_batch_size", 1, 1 << 24));
  }
  if (reader.has("gradient_reduce")) {
    const std::string reduce = reader.choice("gradient_reduce", {"parameters", "fp32", "fp16"});
    training.gradient_reduce = reduce == "fp32"   ? ReducePrecision::fp32
                               : reduce == "fp16" ? ReducePrecision::fp16
                                                  : ReducePrecision::parameters;
  }
  return training;
}

Workload load_model(const JsonReader& reader, const Training& training) {
  if (reader.has("operators")) return read_operator_list(reader, training);
  if (reader.has("family")) {
    reader.choice("family", {"gpt"});
    return make_gpt(read_gpt_spec(reader), training);
  }
  reader.fail("family",
              "a generator (\"family\": \"gpt\", layers, hidden, heads, ...) or an "
              "\"operators\" list");
}

CostModel Scenario::cost_model() const {
  CostSettings settings = cost;
  for (int k : search.granularities) settings.finest_split = std::max(settings.finest_split, k);
  return CostModel(*workload, cluster, training, settings);
}

Scenario Scenario::for_plan(const Plan& plan) const {
  Scenario scenario = *this;
  scenario.training =
      training.for_micro_batch(plan.batch_size, cluster.ranks, plan.accumulation_steps);
  scenario.training.global_batch_size.reset();  // the plan's micro-batch and steps are fixed
  return scenario;
}

Scenario scenario_from_json(const Json& document, const std::string& file) {
  const JsonReader reader(document, file);
  reader.require_only({"name", "description", "model", "cluster", "training", "cost_model",
                       "search", "simulation", "validation", "measured_runs"});
  Scenario scenario;
  scenario.file = file;
  scenario.name = reader.optional_string("name").value_or(
      file.empty() ? std::string("scenario") : fs::path(file).stem().string());
  scenario.description = reader.optional_string("description").value_or("");

  if (reader.has("training")) {
    const Included training = include(reader, "training");
    scenario.training = load_training(
        JsonReader(training.document, training.file, training.file == file ? "$.training" : "$"));
  }
  if (!reader.has("cluster")) reader.fail("cluster", "a cluster (object or file path)");
  const Included cluster = include(reader, "cluster");
  scenario.cluster = load_cluster(
      JsonReader(cluster.document, cluster.file, cluster.file == file ? "$.cluster" : "$"));
  if (!reader.has("model")) reader.fail("model", "a model (object or file path)");
  const Included model = include(reader, "model");
  const JsonReader model_reader(model.document, model.file, model.file == file ? "$.model" : "$");
  scenario.workload = std::make_shared<const Workload>(load_model(model_reader, scenario.training));
  if (model_reader.has("family")) scenario.gpt = read_gpt_spec(model_reader);
  scenario.cluster_document = cluster.document;

  if (reader.has("cost_model")) {
    scenario.cost.kind = reader.choice("cost_model", {"paper", "extended"}) == "paper"
                             ? CostModelKind::paper
                             : CostModelKind::extended;
  }
  if (reader.has("search")) {
    const JsonReader search = reader.object("search");
    search.require_only({"modes", "split", "checkpoint", "optimality_gap", "time_limit"});
    if (search.has("modes")) {
      const Json& modes = search.raw("modes");
      std::string joined;
      if (modes.is_array()) {
        for (const auto& mode : modes) {
          if (!mode.is_string()) search.fail("modes", "a list of modes among " + mode_names());
          joined += mode.get<std::string>() + ",";
        }
      } else if (modes.is_string()) {
        joined = modes.get<std::string>();
      }
      const auto parsed = parse_modes(joined);
      if (!parsed) search.fail("modes", "a list of modes among " + mode_names());
      scenario.search.modes = *parsed;
    }
    if (search.has("split")) {
      const Json& split = search.raw("split");
      const auto parsed = parse_split(split.is_string() ? split.get<std::string>() : split.dump());
      if (!parsed) search.fail("split", "1, 2, 4, 8 or \"auto\"");
      scenario.search.granularities = *parsed;
    }
    if (search.has("checkpoint")) {
      const auto parsed =
          parse_checkpoint_policy(search.choice("checkpoint", {"off", "on", "auto"}));
      scenario.search.checkpoint = *parsed;
    }
    if (search.has("optimality_gap")) {
      const double gap = search.non_negative_number("optimality_gap");
      if (gap >= 0.5)
        search.fail("optimality_gap",
                    "a fraction of the iteration time below 0.5 (1e-4 by default; 0: exact)");
      scenario.search.optimality_gap = gap;
    }
    if (search.has("time_limit")) {
      scenario.search.time_limit_s =
          search.quantity("time_limit", units::Dimension::seconds, limits::time_limit_s);
    }
  }
  if (reader.has("simulation")) {
    // Must be an object; sim/ checks its keys. The cost model reads the schedule it predicts.
    const JsonReader simulation = reader.object("simulation");
    scenario.simulation = document["simulation"];
    scenario.cost.overlap = read_overlap_schedule(simulation);
  }
  if (reader.has("measured_runs")) {
    (void)reader.object("measured_runs");  // must be an object; measured_runs.cpp checks its keys
    scenario.measured_runs = document["measured_runs"];
  }
  if (reader.has("validation")) {
    (void)reader.object("validation");  // must be an object; validate/ checks its keys
    scenario.validation = document["validation"];
  }

  // Cross-checks that need all three parts.
  const CostModel costs = scenario.cost_model();
  try {
    (void)costs.memory_limit_bytes();
  } catch (const InputError&) {
    throw InputError(file, "$.training.memory_limit", "nothing",
                     "a memory limit in training, or \"memory\" in the cluster's gpu");
  }
  for (int i = 0; i < scenario.workload->size(); ++i) {
    const Operator& op = scenario.workload->op(i);
    if (!op.compute_s_per_sample && !scenario.cluster.gpu.compute_flops_per_s) {
      throw InputError(file, fmt::format("$.model.operators[{}].compute_s_per_sample", i),
                       "nothing",
                       "compute_s_per_sample for each operator, or a GPU \"compute\" rate in the "
                       "cluster");
    }
  }
  check_memory_limit(scenario, file);
  check_global_batch(scenario, file);
  check_figures_finite(scenario, costs, file);
  for (Mode mode : scenario.search.modes) {
    if (!mode_fits_cluster(mode, scenario.cluster)) {
      throw InputError(
          file, "$.search.modes", fmt::format("\"{}\"", mode_name(mode)),
          fmt::format("{} only on {}", mode_name(mode), mode_cluster_requirement(mode)));
    }
  }
  return scenario;
}

Scenario load_scenario(const std::string& path) {
  return scenario_from_json(read_json_file(path), path);
}

Plan load_plan(const JsonReader& reader, const Workload& workload, const CostModel& cost_model) {
  // Plans written by `osdp plan --json` carry their figures too; they are read back as-is.
  reader.require_only({"batch_size",
                       "accumulation_steps",
                       "operators",
                       "scenario",
                       "strategy",
                       "iteration_time_s",
                       "throughput_samples_per_s",
                       "peak_memory_bytes",
                       "peak_memory_cause",
                       "memory_limit_bytes",
                       "cost_model",
                       "ranks",
                       "compute_s",
                       "communication_s",
                       "exposed_communication_s",
                       "baselines",
                       "search_time_s",
                       "search_proven_gap",
                       "search_stopped_early",
                       "runs",
                       "simulated",
                       "candidates"});
  Plan plan;
  plan.batch_size = static_cast<int>(reader.integer("batch_size", 1, 1 << 20));
  plan.accumulation_steps =
      static_cast<int>(reader.optional_integer("accumulation_steps", 1, 1 << 16).value_or(0));
  if (reader.has("ranks") && reader.integer("ranks", 1, 1 << 20) != cost_model.ranks()) {
    reader.fail("ranks", fmt::format("the cluster's world size ({} ranks): this plan was made for "
                                     "another cluster",
                                     cost_model.ranks()));
  }
  plan.choices.assign(workload.size(), OperatorChoice{});
  std::vector<bool> seen(workload.size(), false);
  const auto entries = reader.objects("operators");
  for (const auto& entry : entries) {
    entry.require_only(
        {"name", "mode", "slices", "sharded_slices", "checkpoint", "time_s", "memory_bytes"});
    const std::string name = entry.string("name");
    const auto index = workload.find(name);
    if (!index)
      entry.fail("name", "the name of an operator of the model \"" + workload.name() + "\"");
    if (seen[*index]) entry.fail("name", "each operator once");
    seen[*index] = true;
    OperatorChoice choice;
    const std::string mode = entry.string("mode");
    if (const auto parsed = mode_from_name(mode)) {
      choice.mode = *parsed;
    } else {
      entry.fail_value("mode", "\"" + mode + "\"", "one of " + mode_names());
    }
    choice.slices = static_cast<int>(entry.optional_integer("slices", 1, 64).value_or(1));
    const int default_sharded = choice.mode == Mode::dp ? 0 : choice.slices;
    choice.sharded_slices = static_cast<int>(
        entry.optional_integer("sharded_slices", 0, choice.slices).value_or(default_sharded));
    if (entry.has("checkpoint")) {
      choice.checkpoint =
          *checkpoint_from_name(entry.choice("checkpoint", {"none", "unfused", "fused"}));
    }
    if (!choice_consistent(choice)) {
      entry.fail("sharded_slices", "0 for mode dp, and at least 1 for a sharded mode");
    }
    if (!cost_model.valid(*index, choice)) {
      entry.fail_value("", describe(choice),
                       "a choice the operator and cluster allow (slices need a splittable "
                       "operator, checkpointing an input_activation_bytes_per_sample, hsdp "
                       "several nodes)");
    }
    plan.choices[*index] = choice;
  }
  for (int i = 0; i < workload.size(); ++i) {
    if (!seen[i]) {
      reader.fail("operators",
                  "an entry for every operator; missing \"" + workload.op(i).name + "\"");
    }
  }
  return plan;
}

Plan load_plan_file(const std::string& path, const Workload& workload,
                    const CostModel& cost_model) {
  const Json document = read_json_file(path);
  return load_plan(JsonReader(document, path), workload, cost_model);
}

Json plan_to_json(const Plan& plan, const Workload& workload) {
  Json operators = Json::array();
  for (int i = 0; i < workload.size(); ++i) {
    const OperatorChoice& choice = plan.choices[i];
    Json entry = {{"name", workload.op(i).name}, {"mode", std::string(mode_name(choice.mode))}};
    if (choice.slices > 1) {
      entry["slices"] = choice.slices;
      entry["sharded_slices"] = choice.sharded_slices;
    }
    if (choice.checkpoint != Checkpoint::none) {
      entry["checkpoint"] = std::string(checkpoint_name(choice.checkpoint));
    }
    operators.push_back(std::move(entry));
  }
  Json json = {{"batch_size", plan.batch_size}, {"operators", std::move(operators)}};
  if (plan.accumulation_steps > 0) json["accumulation_steps"] = plan.accumulation_steps;
  return json;
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

Json cluster_to_json(const Cluster& cluster) {
  Json gpu = {{"name", cluster.gpu.name},
              {"kernel_launch", cluster.gpu.kernel_launch_s},
              {"overlap_slowdown", cluster.gpu.overlap_slowdown}};
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
        if (law.host_floor_s > 0) json["host_floor"] = law.host_floor_s;
        if (law.extra_slice_s) json["extra_slice"] = *law.extra_slice_s;
        return json;
      };
      laws[kind] = {{"forward", law_json(compute.forward)},
                    {"backward", law_json(compute.backward)}};
    }
    gpu["operator_compute"] = std::move(laws);
  }
  Json json = {{"name", cluster.name},
               {"ranks", cluster.ranks},
               {"gpus_per_node", cluster.gpus_per_node},
               {"gpu", gpu},
               {"collective", group_json(cluster.world)}};
  if (cluster.nodes() > 1) {
    json["intra_node_collective"] = group_json(cluster.intra_node);
    json["inter_node_collective"] = group_json(cluster.inter_node);
  }
  return json;
}

}  // namespace osdp
