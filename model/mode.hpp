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
#include "model/plan.hpp"

namespace osdp {

// The ranks a collective runs over, or a state is sharded over.
enum class RankGroup {
  world,       // all ranks
  intra_node,  // the ranks of one node
  inter_node,  // one rank per node (every node's local group at once)
};

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
  RankGroup group;
  // The full buffer S of one slice: its parameter bytes, or the node's shard of them
  // (bytes / gpus per node) for a collective between nodes.
  bool node_shard_bytes;
  // Runs after the previous collective of the same stage (a reduction chained to another).
  bool after_previous;
  std::string_view what;  // "parameters before forward", for explanations
};

struct ModeDescription {
  Mode mode;
  std::string_view name;      // as in plans, scenarios and --modes
  std::string_view known_as;  // what DeepSpeed / PyTorch call it
  // The ranks the sharded states are spread over; nullopt: nothing is sharded.
  std::optional<RankGroup> shard_group;
  bool shards_parameters;
  bool shards_gradients;
  bool shards_optimizer_states;
  ParameterUse parameters;
  bool needs_several_nodes;  // shards inside a node, replicates across nodes
  std::vector<ModeCollective> collectives;
  std::string_view keeps;  // teaching: what a rank keeps
  std::string_view sends;  // what it sends
  std::string_view wins;   // when it wins
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
int group_ranks(RankGroup group, const Cluster& cluster);
const GroupTiming& group_timing(RankGroup group, const Cluster& cluster);
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

// The model states (parameters, gradients, optimizer states) one rank holds at rest for one
// slice of `mode`, given the slice's full sizes.
double resting_state_bytes(Mode mode, const Cluster& cluster, double parameter_bytes,
                           double gradient_bytes, double optimizer_bytes);

// Whether the choice is consistent in itself: slices >= 1, 0 <= sharded <= slices, and mode dp
// exactly when no slice is sharded.
bool choice_consistent(const OperatorChoice& choice);

}  // namespace osdp
