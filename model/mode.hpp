// What each parallel mode does, written once (as nccl-tests has one descriptor per collective):
// over which ranks it shards which model states, how an operator's compute gets the whole
// parameters, which collectives it issues in which stage of the iteration, where it may run,
// and the words `explain` teaches it with. The cost model, the simulator's program builder, the
// runtime and `explain` all read this table; a new mode is one entry here plus its mechanics.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "model/cluster.hpp"
#include "model/collectives.hpp"
#include "model/parallel_layout.hpp"
#include "model/plan.hpp"

namespace osdp {

// The ranks a collective runs over, or a state is sharded over, are a data-parallel group of the
// parallel layout (model/parallel_layout.hpp): GroupAxis::data (every data-parallel rank),
// data_shard (HSDP's shard: the ranks of one node) or data_replicate (one rank per node, every
// node's local group at once).

// How an operator's compute gets its whole parameters.
enum class ParameterUse {
  replicated,         // every rank holds them: nothing to gather
  gathered_each_use,  // all-gathered before each use (forward, recompute, backward), freed after
  gathered_once,      // all-gathered before forward and kept until the operator's backward
};

// When in the iteration a collective runs.
enum class Stage {
  forward,         // before the operator's forward
  recompute,       // before a checkpointed operator's recompute, when it is not fused
  backward,        // before the operator's backward
  after_backward,  // once the operator's gradient is computed (gradient reduction)
  after_step,      // after the optimizer step (updated parameter shards shared again)
};

struct ModeCollective {
  Stage stage;
  CollectiveKind kind;
  GroupAxis group;
  // The full buffer S of one slice: its parameter bytes, or the node's shard of them
  // (bytes / gpus per node) for a collective between nodes.
  bool node_shard_bytes;
  // Runs after the previous collective of the same stage (a reduction chained to another).
  bool after_previous;
  std::string_view what;  // "parameters before forward", for explanations
};

// A copy between a rank's device memory and its host memory of one sharded slice's shard.
enum class CopyDirection { to_device, to_host };

struct HostCopy {
  // When it runs: before the stage's collective (to_device: before the gather of that stage) or,
  // for after_backward, after the gradient reduction; after_step: after the CPU's update.
  Stage stage;
  CopyDirection direction;
  bool gradients;         // the gradient shard (else the parameter shard)
  std::string_view what;  // "the parameter shard, before the forward gather"
};

// CPU offload of a mode's sharded states (--offload, OperatorChoice::offload): the optimizer
// states and their update always move to the host; the parameter shard and the reduced gradient
// shard as the flags say; the copies move the shards between device and host.
struct OffloadDescription {
  std::string_view known_as;  // "PyTorch FSDP CPUOffload", "DeepSpeed ZeRO-Offload"
  bool parameters;            // the parameter shard lives in host memory
  bool gradients;             // the reduced gradient shard lives in host memory
  std::vector<HostCopy> copies;
  std::string_view keeps;  // teaching, as the mode's own
  std::string_view sends;
  std::string_view wins;
};

struct ModeDescription {
  Mode mode;
  std::string_view name;      // as in plans, scenarios and --modes
  std::string_view known_as;  // what DeepSpeed / PyTorch call it
  // The ranks the sharded states are spread over; nullopt: nothing is sharded.
  std::optional<GroupAxis> shard_group;
  bool shards_parameters;
  bool shards_gradients;
  bool shards_optimizer_states;
  ParameterUse parameters;
  bool needs_several_nodes;  // shards inside a node, replicates across nodes
  std::vector<ModeCollective> collectives;
  std::string_view keeps;  // teaching: what a rank keeps
  std::string_view sends;  // what it sends
  std::string_view wins;   // when it wins
  // Its CPU offload; nullopt: the mode cannot offload (dp shards nothing to move).
  std::optional<OffloadDescription> offload = std::nullopt;
};

// Every mode, in the order of the Mode enum.
std::span<const ModeDescription> mode_descriptions();
const ModeDescription& describe_mode(Mode mode);

std::string_view mode_name(Mode mode);
std::optional<Mode> mode_from_name(std::string_view name);
// "dp, zdp, z2, z1, hsdp": every mode's name, for messages.
std::string mode_names();

// Ranks a mode's sharded states are divided over (1 when it shards nothing).
int shard_degree(Mode mode, const Cluster& cluster);
// Ranks in a group of the cluster.
int group_ranks(GroupAxis group, const Cluster& cluster);
const GroupTiming& group_timing(GroupAxis group, const Cluster& cluster);
// Whether the mode can run on the cluster (hsdp: >= 2 nodes of >= 2 GPUs); `why` says what it
// needs when not.
bool mode_fits_cluster(Mode mode, const Cluster& cluster);
std::string_view mode_cluster_requirement(Mode mode);

// A slice's collectives that actually run for this checkpointing (a recompute gathers only
// when the mode gathers each use and the recompute is not fused with backward).
bool collective_runs(const ModeCollective& collective, Checkpoint checkpoint);

// Whether the collective runs in every micro-batch of an accumulating iteration: the gathers
// for compute do; a reduction after backward does when the mode keeps only a gradient shard
// (FSDP reduce-scatters every micro-batch) and not when it keeps the whole gradient and
// accumulates it (DDP's no_sync, ZeRO-1); what follows the optimizer step runs once.
bool runs_every_micro_batch(const ModeDescription& mode, const ModeCollective& collective);

// The model states (parameters, gradients, optimizer states) one rank holds at rest in device
// memory for one slice of `mode`, given the slice's full sizes; with `offload`, less what the
// mode's offload moves to the host.
double resting_state_bytes(Mode mode, const Cluster& cluster, double parameter_bytes,
                           double gradient_bytes, double optimizer_bytes, bool offload = false);
// What one rank keeps in host memory for one offloaded slice of `mode` (0 when the mode has no
// offload): the optimizer-state shard, and the parameter and gradient shards as it says.
double host_state_bytes(Mode mode, const Cluster& cluster, double parameter_bytes,
                        double gradient_bytes, double optimizer_bytes);

// Whether a host copy runs for this checkpointing (as collective_runs), and in every
// micro-batch (as the collective of its stage).
bool copy_runs(const HostCopy& copy, Checkpoint checkpoint);
bool copy_runs_every_micro_batch(const ModeDescription& mode, const HostCopy& copy);

// Whether the choice is consistent in itself: slices >= 1, 0 <= sharded <= slices, mode dp
// exactly when no slice is sharded, and offload only for a mode that has one.
bool choice_consistent(const OperatorChoice& choice);

}  // namespace osdp
