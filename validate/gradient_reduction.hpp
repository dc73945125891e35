// The sharded runtime's gradient reductions, as each slice's mode runs them (model/mode's
// table), and gradient accumulation over micro-batches:
//   dp    the unit's DP slices' gradients are all-reduced together, asynchronously, when the
//         unit's backward is done (or, as DDP with a bucket larger than the model, every unit's
//         in one bucket after the whole backward); after the last micro-batch only, each
//         micro-batch's gradient added into the whole gradient kept (DDP's no_sync).
//   z1    the whole gradient kept and accumulated likewise, then reduce-scattered in place.
//   zdp, z2  the slice's gradient reduce-scattered right after its backward, in every
//         micro-batch, the reduced chunk added into the shard the rank keeps (FSDP).
//   hsdp  as zdp within the node, then an all-reduce of the chunk across the nodes.
// The gradients are averaged over the world (divided before reducing).
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "validate/parameter_shards.hpp"
#include "validate/step_collectives.hpp"

namespace osdp::validate {

class GradientReduction {
 public:
  // The reductions of `units` (which must outlive this) over `world` ranks; with
  // `dp_bucket_after_backward`, every unit's DP gradient becomes a view of one bucket.
  // Throws (c10::Error) when the mode table's reductions do not fit the gradient the runtime
  // keeps for accumulation.
  GradientReduction(std::vector<RuntimeUnit>& units, StepCollectives& collectives, int world,
                    int micro_batches, bool dp_bucket_after_backward,
                    const at::TensorOptions& float_options);

  // Slice s of unit i's gradient from micro-batch `micro`'s backward (undefined: zero): its
  // DP part accumulated, or its reduction issued (after the last micro-batch only where the
  // mode accumulates the whole gradient).
  void reduce_slice(int i, int s, at::Tensor gradient, int micro);
  // After unit i's backward: the all-reduce of its DP slices' gradients (without the bucket).
  void reduce_unit_dp_gradients(int i, int micro);
  // After a micro-batch's whole backward: the bucket's all-reduce (with the bucket).
  void reduce_dp_bucket(int micro);

 private:
  bool last_micro_batch(int micro) const { return micro + 1 == micro_batches_; }
  void accumulate(at::Tensor destination, const at::Tensor& gradient, int micro) const;
  void gather_dp_gradients_into_one_bucket();
  void check_accumulation() const;

  std::vector<RuntimeUnit>& units_;
  StepCollectives& collectives_;
  int world_ = 1;
  int micro_batches_ = 1;
  at::TensorOptions float_options_;
  // The DP slices' all-reduce (their bucket), as the table has DP's reduction.
  bool dp_reduces_every_micro_batch_ = false;
  // With dp_bucket_after_backward: every unit's dp_grad is a view of this one buffer,
  // all-reduced in one collective after the backward.
  at::Tensor dp_bucket_;
};

}  // namespace osdp::validate
