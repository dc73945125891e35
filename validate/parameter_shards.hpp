// The sharded runtime's parameter layout: what each rank holds of the GPT under a plan.
//
// A plan's choice covers a unit (one operator, or an FSDP unit of consecutive operators). The
// unit is split into slices along the reduction dimension (attention heads, MLP hidden units,
// LM-head input features; LayerNorm, residual and output bias ride with slice 0), and each
// slice keeps its parameters in one flat buffer made of pieces of the canonical tensors. The
// first `sharded_slices` slices run in the choice's mode, the others in DP:
//   dp    whole parameters; their gradient in the unit's DP gradient buffer.
//   gathering modes (zdp, z2, hsdp)  a 1/N shard of the parameters and of their gradient; the
//         flat buffer (`full`) has storage only while gathered (gather_schedule).
//   z1    whole parameters and gradient; this rank updates its chunk of the parameters.
// Where the mode's offload description says so, the shard, its gradient and the optimizer
// states live in host memory.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/mode.hpp"
#include "model/plan.hpp"
#include "model/workload.hpp"
#include "validate/communicator.hpp"
#include "validate/gpt_operators.hpp"
#include "validate/gpt_parameters.hpp"

namespace osdp::validate {

// A block of a canonical tensor stored in a slice's flat buffer: rows (dim 0) or columns
// (dim 1) [start, start + length), kept contiguous under `role`.
struct ParameterPiece {
  int member = 0;  // the unit's member (operator) it belongs to
  std::string role;
  std::string tensor;  // canonical name
  int dim = 0;
  int64_t start = 0;
  int64_t length = 0;
  std::vector<int64_t> shape;  // of the block
  int64_t offset = 0;          // in the flat buffer
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// One slice of a unit and all this rank keeps of it: its layout, parameters and gradient
// (here), the state of its gather (gather_schedule) and of its gradient reduction
// (gradient_reduction), and its optimizer states (optimizer_step).
struct OperatorSlice {
  std::vector<ParameterPiece> pieces;
  int64_t numel = 0;  // padded to a multiple of the world size
  bool sharded = false;
  Mode mode = Mode::dp;
  std::vector<int> shard_group;    // ranks sharing the slice (ring order)
  std::vector<int> replica_group;  // hsdp: ranks holding the same shard
  int shard_index = 0;             // this rank's chunk in shard_group
  // Flat parameters as the operator computes with them: a leaf that requires grad; for a
  // sharded slice its storage is allocated only while gathered.
  at::Tensor full;
  bool present = false;
  CommHandle gathered;
  at::Tensor shard;       // sharded: this rank's chunk of the parameters (z1: a view of full)
  at::Tensor shard_grad;  // sharded: reduced gradient chunk (z1: a view of full_grad)
  at::Tensor full_grad;   // z1: the whole gradient, kept like DP's (ZeRO-1 shards no gradient)
  CommHandle reduced;     // sharded: gradient reduction in flight
  int64_t dp_offset = 0;  // dp: offset in the unit's gradient bucket
  at::Tensor exp_avg, exp_avg_sq;
  // From the mode's table: its gradient reduction runs in every micro-batch (it keeps only a
  // shard), not only after the last one (it keeps the whole gradient and accumulates it).
  bool reduces_every_micro_batch = true;
  // CPU offload (the mode's offload description): the optimizer states live in host memory
  // (the host arena on the CPU testbed) and the step runs there; the parameter shard and the
  // reduced gradient shard too when the description says so. The copies between device and
  // host are the gather's copy of the shard in, the reduction's copy of its chunk out, and (for
  // parameters kept on the device) the updated shard back after the step.
  bool offloaded = false;
  bool parameters_on_host = false;
  bool gradients_on_host = false;

  int64_t shard_numel() const { return numel / static_cast<int64_t>(shard_group.size()); }
  // Whether the slice's parameters are gathered before use (not when its mode replicates them).
  bool gathers() const {
    return sharded && describe_mode(mode).parameters != ParameterUse::replicated;
  }
  at::Tensor& local_parameters() { return sharded ? shard : full; }
};

// The collective that reduces the slice's gradient: "all-reduce" (dp) or "reduce-scatter".
std::string_view reduction_name(const OperatorSlice& slice);

// One GPT operator of a unit.
struct UnitMember {
  OperatorKind kind = OperatorKind::generic;
  std::string prefix;  // canonical name prefix, e.g. "layer0.attention."
};

// What the plan chooses for: one operator, or an FSDP unit of consecutive operators that share
// one flat buffer (one gather, one gradient reduction). A unit of several is never split, so its
// one slice holds every member's pieces and its forward runs the members in turn.
struct RuntimeUnit {
  std::vector<UnitMember> members;
  OperatorChoice choice;
  std::vector<OperatorSlice> slices;
  at::Tensor dp_grad;  // gradients of the DP slices, all-reduced together
  CommHandle dp_reduced;

  OperatorKind first_kind() const { return members.front().kind; }
  // Its first operator's name ("layer0.attention"), as the simulator names the unit's items.
  std::string name() const;
  OperatorKind last_kind() const { return members.back().kind; }
};

// This rank among the world, and the HSDP shard groups' size (ranks per node).
struct ShardPlacement {
  int world = 1;
  int rank = 0;
  int gpus_per_node = 1;
};

// The plan's units as this rank holds them, their parameters from `initial` (canonical
// layout), tensors made with `float_options`; without optimizer states (optimizer_step). The
// plan must be runnable (check_runnable).
std::vector<RuntimeUnit> build_units(const GptShape& shape, const Plan& plan,
                                     const NamedTensors& initial, const ShardPlacement& placement,
                                     const at::TensorOptions& float_options);

// The parameters of each of the slice's `members`, by role: one split of the flat buffer, so
// that backward assembles the buffer's gradient in one concatenation (as FSDP's flat
// parameter does), not one buffer-sized add per piece as separate narrows would.
std::vector<RoleParameters> member_parameters(const OperatorSlice& slice, int members);

// The full parameters in canonical layout (a collective: every rank calls it).
NamedTensors gather_full_parameters(const GptShape& shape, std::vector<RuntimeUnit>& units,
                                    Communicator& communicator,
                                    const at::TensorOptions& float_options);

// Bytes the units hold between steps (parameters, gradients, optimizer states): in device
// memory, or with `host` in the host memory of offloaded states. The gradients counted are also
// what accumulation adds micro-batches into (the whole gradient of dp and z1, the kept shard of
// the others): it needs no buffer of its own.
std::int64_t persistent_bytes(const std::vector<RuntimeUnit>& units, bool host = false);

// Whether `mode`'s gradient reduction runs in every micro-batch (model/mode's table). The
// runtime chains a mode's reductions after backward as one unit, so they must agree.
bool mode_reduces_every_micro_batch(Mode mode);

}  // namespace osdp::validate
