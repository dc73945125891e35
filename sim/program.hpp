// The iteration as every rank runs it: compute items on the compute stream and collectives on
// their group's lanes, in issue order, with the dependencies that FSDP / DDP semantics impose
// (gather before use, prefetch windows, the rate limiter, reduce-scatter after backward) and the
// memory each item allocates or frees. One program serves all ranks; the executor instantiates
// it per rank (compute) and per group instance (collectives).
#pragma once

#include <vector>

#include "model/collectives.hpp"
#include "model/cost_model.hpp"
#include "sim/network.hpp"
#include "sim/options.hpp"
#include "sim/simulate.hpp"

namespace osdp::sim {

enum class Phase { forward, recompute, backward, optimizer };
std::string_view phase_name(Phase phase);

enum class DepOn { start, end };

struct Dep {
  int item = 0;
  DepOn on = DepOn::end;
};

// +bytes allocates, -bytes frees. `op` names the cause (-1: none).
struct MemoryAction {
  double bytes = 0;
  MemoryCategory category = MemoryCategory::model_states;
  int op = -1;
};

struct ProgramItem {
  bool collective = false;
  // A copy of one rank's shard between its device and host memory (CPU offload): one task per
  // rank like compute, on its group's lane like a collective (`group`, `lane`, `bytes`,
  // `category` as the collective it feeds or drains), taking `work_s`.
  bool host_copy = false;
  CopyDirection copy_direction = CopyDirection::to_device;
  int op = -1;
  int slice = 0;
  // Compute items.
  Phase phase = Phase::forward;
  double work_s = 0;  // at full speed, launch gaps included
  // Collectives.
  CollectiveKind kind = CollectiveKind::all_gather;
  GroupKind group = GroupKind::world;
  int lane = 0;
  double bytes = 0;
  CommCategory category = CommCategory::ag_forward;

  std::vector<MemoryAction> at_start;  // on the rank, or on every member of the group
  std::vector<MemoryAction> at_end;
  std::vector<Dep> deps;
};

struct Program {
  std::vector<ProgramItem> items;
  std::vector<MemoryAction> initial;  // live from the start: model states, extra buffers
  bool uses_node_groups = false;
  int accumulation_steps = 1;  // micro-batches per iteration
  int lanes = 1;
  int compute_items = 0;
  int collective_items = 0;
};

// Throws InputError when the plan does not fit the workload or cluster.
Program build_program(const CostModel& model, const Plan& plan, const SimOptions& options);

}  // namespace osdp::sim
