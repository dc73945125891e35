#include "model/mode.hpp"

#include <array>
#include <stdexcept>
#include <string>

namespace osdp {
namespace {

constexpr ModeCollective gather(Stage stage, std::string_view what,
                                GroupAxis group = GroupAxis::data) {
  return {stage, CollectiveKind::all_gather, group, false, false, what};
}

// PyTorch FSDP's CPUOffload(offload_params=True) for the modes that gather each use: the
// parameter shard, the reduced gradient shard and the optimizer states live on the host; the
// shard is copied in before every gather and the reduced gradient shard out after every
// reduction; the CPU updates the shard.
OffloadDescription fsdp_cpu_offload() {
  return {"PyTorch FSDP CPUOffload(offload_params=True)",
          true,
          true,
          {{Stage::forward, CopyDirection::to_device, false,
            "the parameter shard in, before the forward gather"},
           {Stage::recompute, CopyDirection::to_device, false,
            "the parameter shard in, before the recompute gather"},
           {Stage::backward, CopyDirection::to_device, false,
            "the parameter shard in, before the backward gather"},
           {Stage::after_backward, CopyDirection::to_host, true,
            "the reduced gradient shard out, after the reduce-scatter"}},
          "no model state in device memory at rest: the shards of parameters, gradients and "
          "optimizer states in host memory; the optimizer step on the CPU",
          "the mode's collectives, plus the parameter shard over PCIe before every gather and "
          "the gradient shard back after every reduction",
          "when even 1/N of the states does not fit and the host's PCIe and CPU are fast enough "
          "for the step"};
}

// DeepSpeed ZeRO-Offload for the modes that keep their parameters on the device: the reduced
// gradient shard goes to the host, the CPU updates its optimizer states (fp32 master included),
// the updated parameter shard comes back after the step.
OffloadDescription zero_offload() {
  return {"DeepSpeed ZeRO-Offload",
          false,
          true,
          {{Stage::after_backward, CopyDirection::to_host, true,
            "the reduced gradient shard out, after the reduce-scatter"},
           {Stage::after_step, CopyDirection::to_device, false,
            "the updated parameter shard in, after the CPU's step"}},
          "the parameters stay on the device (Z1's whole gradient too); the reduced gradient "
          "shard and the optimizer-state shard in host memory; the step on the CPU",
          "the mode's collectives, plus the gradient shard over PCIe to the host and the updated "
          "parameter shard back, once an iteration",
          "when the optimizer states are what does not fit: they leave the device, at the cost "
          "of a CPU step"};
}

const std::array<ModeDescription, 5>& table() {
  static const std::array<ModeDescription, 5> modes{{
      {Mode::dp,
       "dp",
       "DDP (PyTorch DistributedDataParallel)",
       std::nullopt,
       false,
       false,
       false,
       ParameterUse::replicated,
       false,
       {{Stage::after_backward, CollectiveKind::all_reduce, GroupAxis::data, false, false,
         "gradients after backward"}},
       "everything: parameters, gradients and optimizer states on every rank",
       "one all-reduce of the gradients (2(N-1) steps of S/N)",
       "when the states fit: the least communication of all modes"},
      {Mode::zdp,
       "zdp",
       "ZeRO-3, PyTorch FSDP FULL_SHARD",
       GroupAxis::data,
       true,
       true,
       true,
       ParameterUse::gathered_each_use,
       false,
       {gather(Stage::forward, "parameters before forward"),
        gather(Stage::recompute, "parameters again for the recompute"),
        gather(Stage::backward, "parameters before backward"),
        {Stage::after_backward, CollectiveKind::reduce_scatter, GroupAxis::data, false, false,
         "gradients after backward"}},
       "a 1/N shard of every state; the whole parameters only while the operator computes",
       "all-gathers before forward and backward, a reduce-scatter of the gradients (3(N-1) "
       "steps of S/N, 1.5x DP)",
       "when memory is tight: 1/N of the states buys a larger batch",
       fsdp_cpu_offload()},
      {Mode::z2,
       "z2",
       "ZeRO-2 style, PyTorch FSDP SHARD_GRAD_OP",
       GroupAxis::data,
       true,
       true,
       true,
       ParameterUse::gathered_once,
       false,
       {gather(Stage::forward, "parameters before forward, kept until backward"),
        {Stage::after_backward, CollectiveKind::reduce_scatter, GroupAxis::data, false, false,
         "gradients after backward"}},
       "a 1/N shard of every state, plus the whole parameters from forward to backward",
       "one all-gather and one reduce-scatter (DP's volume)",
       "when gradients and optimizer states are what does not fit, not the parameters",
       zero_offload()},
      {Mode::z1,
       "z1",
       "ZeRO-1 (DeepSpeed stage 1)",
       GroupAxis::data,
       false,
       false,
       true,
       ParameterUse::replicated,
       false,
       {{Stage::after_backward, CollectiveKind::reduce_scatter, GroupAxis::data, false, false,
         "gradients after backward"},
        {Stage::after_step, CollectiveKind::all_gather, GroupAxis::data, false, false,
         "updated parameter shards after the optimizer step"}},
       "parameters and gradients whole, a 1/N shard of the optimizer states (and of the update)",
       "a reduce-scatter of the gradients, an all-gather of the updated parameters (DP's volume)",
       "when the optimizer states (12 of 16 bytes a parameter in mixed precision) do not fit",
       zero_offload()},
      {Mode::hsdp,
       "hsdp",
       "hybrid sharding (PyTorch FSDP HYBRID_SHARD)",
       GroupAxis::data_shard,
       true,
       true,
       true,
       ParameterUse::gathered_each_use,
       true,
       {gather(Stage::forward, "parameters inside the node", GroupAxis::data_shard),
        gather(Stage::recompute, "parameters inside the node for the recompute",
               GroupAxis::data_shard),
        gather(Stage::backward, "parameters inside the node before backward",
               GroupAxis::data_shard),
        {Stage::after_backward, CollectiveKind::reduce_scatter, GroupAxis::data_shard, false, false,
         "gradients inside the node"},
        {Stage::after_backward, CollectiveKind::all_reduce, GroupAxis::data_replicate, true, true,
         "the gradient shard across nodes"}},
       "a 1/G shard of every state (G GPUs a node), replicated across nodes",
       "ZDP's collectives inside the node, an all-reduce of the 1/G gradient shard between nodes",
       "on several nodes with slow links between them: gathers stay on the fast links",
       fsdp_cpu_offload()},
  }};
  return modes;
}

}  // namespace

std::span<const ModeDescription> mode_descriptions() { return table(); }

const ModeDescription& describe_mode(Mode mode) {
  for (const ModeDescription& description : table()) {
    if (description.mode == mode) return description;
  }
  throw std::logic_error("describe_mode: a mode without a description");
}

std::string_view mode_name(Mode mode) { return describe_mode(mode).name; }

std::optional<Mode> mode_from_name(std::string_view name) {
  for (const ModeDescription& description : table()) {
    if (description.name == name) return description.mode;
  }
  return std::nullopt;
}

std::string mode_names() {
  std::string names;
  for (const ModeDescription& description : table()) {
    if (!names.empty()) names += ", ";
    names += description.name;
  }
  return names;
}

int group_ranks(GroupAxis group, const Cluster& cluster) {
  switch (group) {
    case GroupAxis::data:
      return cluster.ranks;
    case GroupAxis::data_shard:
      return cluster.gpus_per_node;
    case GroupAxis::data_replicate:
      return cluster.nodes();
    case GroupAxis::tensor:  // no data-parallel mode runs on these
    case GroupAxis::pipeline:
      break;
  }
  return 1;
}

const GroupTiming& group_timing(GroupAxis group, const Cluster& cluster) {
  switch (group) {
    case GroupAxis::data:
      return cluster.world;
    case GroupAxis::data_shard:
      return cluster.intra_node;
    case GroupAxis::data_replicate:
      return cluster.inter_node;
    case GroupAxis::tensor:  // no data-parallel mode runs on these
    case GroupAxis::pipeline:
      break;
  }
  return cluster.world;
}

int shard_degree(Mode mode, const Cluster& cluster) {
  const auto& group = describe_mode(mode).shard_group;
  return group ? group_ranks(*group, cluster) : 1;
}

bool mode_fits_cluster(Mode mode, const Cluster& cluster) {
  return !describe_mode(mode).needs_several_nodes ||
         (cluster.nodes() >= 2 && cluster.gpus_per_node >= 2);
}

std::string_view mode_cluster_requirement(Mode mode) {
  return describe_mode(mode).needs_several_nodes
             ? "a cluster of several nodes with several GPUs each"
             : "any cluster";
}

namespace {

// Whether work of this stage runs under this checkpointing: a recompute only when unfused.
bool stage_runs(Stage stage, Checkpoint checkpoint) {
  return stage != Stage::recompute || checkpoint == Checkpoint::unfused;
}

// Whether work of this stage runs in every micro-batch or once per step (see the header).
bool stage_runs_every_micro_batch(const ModeDescription& mode, Stage stage) {
  switch (stage) {
    case Stage::forward:
    case Stage::recompute:
    case Stage::backward:
      return true;
    case Stage::after_backward:
      return mode.shards_gradients;
    case Stage::after_step:
      return false;
  }
  return true;
}

}  // namespace

bool collective_runs(const ModeCollective& collective, Checkpoint checkpoint) {
  return stage_runs(collective.stage, checkpoint);
}

bool runs_every_micro_batch(const ModeDescription& mode, const ModeCollective& collective) {
  return stage_runs_every_micro_batch(mode, collective.stage);
}

double resting_state_bytes(Mode mode, const Cluster& cluster, double parameter_bytes,
                           double gradient_bytes, double optimizer_bytes, bool offload) {
  const ModeDescription& description = describe_mode(mode);
  const double degree = shard_degree(mode, cluster);
  auto held = [degree](bool sharded, double bytes) { return sharded ? bytes / degree : bytes; };
  const OffloadDescription* moved =
      offload && description.offload ? &*description.offload : nullptr;
  // Offloaded states leave the device: the optimizer states always, the parameter shard when
  // the host keeps it; a gradient the mode shards leaves too when the host keeps its shard (a
  // whole gradient, as Z1 keeps, stays: the host gets a copy of the rank's shard of it).
  const bool parameters_moved = moved && moved->parameters && description.shards_parameters;
  const bool gradients_moved = moved && moved->gradients && description.shards_gradients;
  return (parameters_moved ? 0.0 : held(description.shards_parameters, parameter_bytes)) +
         (gradients_moved ? 0.0 : held(description.shards_gradients, gradient_bytes)) +
         (moved ? 0.0 : held(description.shards_optimizer_states, optimizer_bytes));
}

double host_state_bytes(Mode mode, const Cluster& cluster, double parameter_bytes,
                        double gradient_bytes, double optimizer_bytes) {
  const ModeDescription& description = describe_mode(mode);
  if (!description.offload) return 0.0;
  const double degree = shard_degree(mode, cluster);
  return (description.offload->parameters ? parameter_bytes / degree : 0.0) +
         (description.offload->gradients ? gradient_bytes / degree : 0.0) +
         optimizer_bytes / degree;
}

bool copy_runs(const HostCopy& copy, Checkpoint checkpoint) {
  return stage_runs(copy.stage, checkpoint);
}

bool copy_runs_every_micro_batch(const ModeDescription& mode, const HostCopy& copy) {
  return stage_runs_every_micro_batch(mode, copy.stage);
}

bool choice_consistent(const OperatorChoice& choice) {
  return choice.slices >= 1 && choice.sharded_slices >= 0 &&
         choice.sharded_slices <= choice.slices &&
         (choice.mode == Mode::dp) == (choice.sharded_slices == 0) &&
         (!choice.offload || describe_mode(choice.mode).offload.has_value());
}

}  // namespace osdp
