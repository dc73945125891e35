#include "validate/gradient_reduction.hpp"

#include <fmt/format.h>

#include <functional>
#include <string>
#include <utility>

namespace osdp::validate {

GradientReduction::GradientReduction(std::vector<RuntimeUnit>& units, StepCollectives& collectives,
                                     int world, int micro_batches, bool dp_bucket_after_backward,
                                     const at::TensorOptions& float_options)
    : units_(units),
      collectives_(collectives),
      world_(world),
      micro_batches_(micro_batches),
      float_options_(float_options),
      dp_reduces_every_micro_batch_(mode_reduces_every_micro_batch(Mode::dp)) {
  if (dp_bucket_after_backward) gather_dp_gradients_into_one_bucket();
  check_accumulation();
}

// The units' DP gradients become views of one buffer (each part a multiple of the world
// size, so the whole one is too), in unit order.
void GradientReduction::gather_dp_gradients_into_one_bucket() {
  int64_t total = 0;
  for (const RuntimeUnit& unit : units_) total += unit.dp_grad.defined() ? unit.dp_grad.numel() : 0;
  if (total == 0) return;
  dp_bucket_ = at::zeros({total}, float_options_);
  int64_t offset = 0;
  for (RuntimeUnit& unit : units_) {
    if (!unit.dp_grad.defined()) continue;
    const int64_t numel = unit.dp_grad.numel();
    unit.dp_grad = dp_bucket_.narrow(0, offset, numel);
    offset += numel;
  }
}

// The runtime accumulates a gradient either in the whole gradient it keeps, reducing it after
// the last micro-batch (dp's bucket, z1), or in the shard it keeps, reducing every
// micro-batch (the modes that gather): the mode table must say the same.
void GradientReduction::check_accumulation() const {
  if (micro_batches_ == 1) return;
  TORCH_CHECK(!dp_reduces_every_micro_batch_,
              "mode dp reduces every micro-batch, but the runtime accumulates its whole gradient");
  for (const RuntimeUnit& unit : units_) {
    for (const OperatorSlice& slice : unit.slices) {
      if (!slice.sharded) continue;
      const bool keeps_whole = slice.full_grad.defined();
      TORCH_CHECK(keeps_whole != slice.reduces_every_micro_batch, "mode ",
                  std::string(mode_name(slice.mode)), ": the table's gradient reduction ",
                  slice.reduces_every_micro_batch ? "every micro-batch" : "after the last",
                  " does not fit the gradient the runtime keeps");
    }
  }
}

// Adds (after the first micro-batch: copies) a micro-batch's gradient into what accumulates it.
void GradientReduction::accumulate(at::Tensor destination, const at::Tensor& gradient,
                                   int micro) const {
  if (micro == 0) {
    destination.copy_(gradient);
  } else {
    destination.add_(gradient);
  }
}

void GradientReduction::reduce_slice(int i, int s, at::Tensor grad, int micro) {
  RuntimeUnit& unit = units_[i];
  OperatorSlice& slice = unit.slices[s];
  Communicator& comm = collectives_.communicator();
  if (!grad.defined()) grad = at::zeros({slice.numel}, float_options_);
  if (!slice.sharded) {
    if (micro == 0 && unit.dp_reduced.valid())
      collectives_.wait(unit.dp_reduced, "all-reduce " + unit.name());  // previous step's
    accumulate(unit.dp_grad.narrow(0, slice.dp_offset, slice.numel), grad, micro);
    return;  // the unit's DP gradients are all-reduced after its backward
  }
  if (slice.full_grad.defined()) {
    // ZeRO-1 keeps the whole gradient; it is reduce-scattered in place.
    if (micro == 0 && slice.reduced.valid()) {
      collectives_.wait(slice.reduced, fmt::format("{} {}", reduction_name(slice), unit.name()));
    }
    accumulate(slice.full_grad, grad, micro);
    grad = slice.full_grad;
  }
  if (!slice.reduces_every_micro_batch && !last_micro_batch(micro)) return;
  grad.div_(world_);
  collectives_.record(ScheduleEntry::Action::reduce, i, s);
  at::Tensor chunk = grad.narrow(0, slice.shard_index * slice.shard_numel(), slice.shard_numel());
  at::Tensor destination = slice.shard_grad;
  // The reduced chunk goes into the shard the rank keeps, added to the earlier micro-batches'
  // (the callbacks run in issue order, so one micro-batch's add follows the previous one's).
  std::function<void()> keep = [chunk, destination, first = micro == 0]() mutable {
    if (first) {
      destination.copy_(chunk);
    } else {
      destination.add_(chunk);
    }
  };
  if (slice.full_grad.defined() && slice.gradients_on_host) {
    // ZeRO-Offload on Z1: the reduced chunk of the whole gradient is copied to the host.
    std::function<void()> copy_out = [chunk, destination]() mutable { destination.copy_(chunk); };
    slice.reduced =
        comm.start(CollectiveKind::reduce_scatter, grad, slice.shard_group, std::move(copy_out));
  } else if (slice.full_grad.defined()) {
    slice.reduced = comm.start(CollectiveKind::reduce_scatter, grad, slice.shard_group);
  } else if (slice.replica_group.empty()) {
    slice.reduced =
        comm.start(CollectiveKind::reduce_scatter, grad, slice.shard_group, std::move(keep));
  } else {
    comm.start(CollectiveKind::reduce_scatter, grad, slice.shard_group);
    slice.reduced =
        comm.start(CollectiveKind::all_reduce, chunk, slice.replica_group, std::move(keep));
  }
}

void GradientReduction::reduce_unit_dp_gradients(int i, int micro) {
  RuntimeUnit& unit = units_[i];
  if (!unit.dp_grad.defined() || dp_bucket_.defined() ||
      !(dp_reduces_every_micro_batch_ || last_micro_batch(micro))) {
    return;
  }
  unit.dp_grad.div_(world_);
  unit.dp_reduced = collectives_.communicator().start(CollectiveKind::all_reduce, unit.dp_grad);
  collectives_.record(ScheduleEntry::Action::reduce, i, -1);
}

void GradientReduction::reduce_dp_bucket(int micro) {
  if (!dp_bucket_.defined() || !(dp_reduces_every_micro_batch_ || last_micro_batch(micro))) {
    return;
  }
  dp_bucket_.div_(world_);
  const CommHandle reduced =
      collectives_.communicator().start(CollectiveKind::all_reduce, dp_bucket_);
  for (int i = 0; i < static_cast<int>(units_.size()); ++i) {
    if (!units_[i].dp_grad.defined()) continue;
    units_[i].dp_reduced = reduced;
    collectives_.record(ScheduleEntry::Action::reduce, i, -1);
  }
}

}  // namespace osdp::validate
