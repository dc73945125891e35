#include "validate/gather_schedule.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "validate/tensor_storage.hpp"

namespace osdp::validate {
namespace {

// A fused recompute keeps its gather for the backward that follows: no backward prefetch then
// (the simulator's rule; it bounds the gathered units in flight to two).
bool keeps_gather_for_backward(const OperatorSlice& slice, const OperatorChoice& choice,
                               Phase phase) {
  return phase == Phase::recompute && slice.gathers() &&
         describe_mode(slice.mode).parameters == ParameterUse::gathered_each_use &&
         !frees_after(slice, choice, phase);
}

}  // namespace

bool is_checkpointed(const OperatorChoice& choice) { return choice.checkpoint != Checkpoint::none; }

bool frees_after(const OperatorSlice& slice, const OperatorChoice& choice, Phase phase) {
  if (!slice.gathers()) return false;
  const bool each_use = describe_mode(slice.mode).parameters == ParameterUse::gathered_each_use;
  switch (phase) {
    case Phase::forward:
      return each_use;
    case Phase::recompute:
      return each_use && choice.checkpoint == Checkpoint::unfused;
    case Phase::backward:
      return true;
  }
  return true;
}

GatherSchedule::GatherSchedule(std::vector<RuntimeUnit>& units, StepCollectives& collectives,
                               int prefetch_depth, BackwardPrefetch backward_prefetch,
                               int micro_batches)
    : units_(units),
      collectives_(collectives),
      prefetch_depth_(prefetch_depth),
      backward_prefetch_(backward_prefetch),
      micro_batches_(micro_batches) {
  build_gather_order();
}

// The order in which units acquire their slices, per phase; the step follows it.
template <typename Visit>
void GatherSchedule::walk(Visit visit) const {
  const int n = static_cast<int>(units_.size());
  for (int i = 0; i < n; ++i) {
    for (int s = 0; s < units_[i].choice.slices; ++s) visit(i, s, Phase::forward);
  }
  for (int i = n - 1; i >= 0; --i) {
    const int k = units_[i].choice.slices;
    if (is_checkpointed(units_[i].choice)) {
      for (int s = 0; s < k; ++s) visit(i, s, Phase::recompute);
    }
    for (int s = k - 1; s >= 1; --s) visit(i, s, Phase::backward);
    visit(i, 0, Phase::backward);
  }
}

void GatherSchedule::build_gather_order() {
  std::map<std::pair<int, int>, bool> present;
  walk([&](int i, int s, Phase phase) {
    const OperatorSlice& slice = units_[i].slices[s];
    if (!slice.gathers()) return;
    bool& is_present = present[{i, s}];
    if (!is_present) gather_order_.push_back({i, s, phase});
    is_present = !frees_after(slice, units_[i].choice, phase);
  });
  forward_gathers_ = static_cast<std::size_t>(
      std::count_if(gather_order_.begin(), gather_order_.end(),
                    [](const GatherEvent& event) { return event.phase == Phase::forward; }));
}

void GatherSchedule::start_step() {
  next_gather_ = issued_gather_ = issue_limit_ = 0;
  admit_forward_prefetch(0);
  issue_admitted_gathers();
}

void GatherSchedule::check_step_consumed() const {
  TORCH_CHECK(next_gather_ == step_gathers(), "not every planned gather was consumed");
}

void GatherSchedule::issue_gather(OperatorSlice& slice) {
  allocate_storage(slice.full);
  at::Tensor data = slice.full.detach();
  copy_unversioned(data.narrow(0, slice.shard_index * slice.shard_numel(), slice.shard_numel()),
                   slice.shard);
  slice.gathered =
      collectives_.communicator().start(CollectiveKind::all_gather, data, slice.shard_group);
  slice.present = true;
}

// Issues the gathers the prefetch window admits, in order, never into a buffer still
// allocated (that one is issued when the buffer is released).
void GatherSchedule::issue_admitted_gathers() {
  const std::size_t limit = std::min(issue_limit_, step_gathers());
  while (issued_gather_ < limit) {
    const GatherEvent& event = gather_event(issued_gather_);
    OperatorSlice& slice = units_[event.op].slices[event.slice];
    if (slice.present) return;
    issue_gather(slice);
    collectives_.record(ScheduleEntry::Action::gather, event.op, event.slice);
    ++issued_gather_;
  }
}

void GatherSchedule::admit_gathers_up_to(std::size_t limit) {
  issue_limit_ = std::max(issue_limit_, limit);
}

std::size_t GatherSchedule::step_gathers() const { return micro_batches_ * gather_order_.size(); }

const GatherSchedule::GatherEvent& GatherSchedule::gather_event(std::size_t e) const {
  return gather_order_[e % gather_order_.size()];
}

// The first event of micro-batch `micro`.
std::size_t GatherSchedule::micro_batch_start(int micro) const {
  return micro * gather_order_.size();
}

// Forward: `prefetch_depth` gathers ahead of the one in use, within the forward pass (the
// backward policy decides when the first backward gather goes).
void GatherSchedule::admit_forward_prefetch(int micro) {
  admit_gathers_up_to(std::min(next_gather_ + static_cast<std::size_t>(prefetch_depth_),
                               micro_batch_start(micro) + forward_gathers_));
}

// Backward: the next gather, within this micro-batch (the next one's forward gathers are the
// forward prefetch's).
void GatherSchedule::admit_backward_prefetch(int micro) {
  admit_gathers_up_to(std::min(next_gather_ + 1, micro_batch_start(micro + 1)));
}

// The last backward compute of a micro-batch before another: the next forward's prefetch
// window opens as it starts (the simulator's forward window runs on across micro-batches).
void GatherSchedule::admit_next_micro_batch_prefetch(int micro) {
  if (micro + 1 >= micro_batches_) return;
  admit_gathers_up_to(micro_batch_start(micro + 1) +
                      std::min(static_cast<std::size_t>(prefetch_depth_), forward_gathers_));
}

bool GatherSchedule::is_next_gather(int i, int s) const {
  return next_gather_ < step_gathers() && gather_event(next_gather_).op == i &&
         gather_event(next_gather_).slice == s;
}

// Waits for slice s of unit i to be gathered (issuing the gather if the window has not).
void GatherSchedule::consume_gather(int i, int s) {
  OperatorSlice& slice = units_[i].slices[s];
  if (!slice.gathers()) return;
  if (slice.present && !(next_gather_ < issued_gather_ && is_next_gather(i, s))) {
    return;  // kept from an earlier phase (z2, fused recompute)
  }
  TORCH_CHECK(is_next_gather(i, s), "gather order broken at operator ", i, " slice ", s);
  if (next_gather_ == issued_gather_) {
    issue_gather(slice);
    collectives_.record(ScheduleEntry::Action::gather, i, s);
    ++issued_gather_;
  }
  ++next_gather_;
  collectives_.wait(slice.gathered, "all-gather " + units_[i].name());
}

void GatherSchedule::acquire(int i, int s, Phase phase, int micro) {
  consume_gather(i, s);
  if (phase == Phase::forward) {
    admit_forward_prefetch(micro);
  } else if (backward_prefetch_ == BackwardPrefetch::pre &&
             !keeps_gather_for_backward(units_[i].slices[s], units_[i].choice, phase)) {
    admit_backward_prefetch(micro);
  }
  if (phase == Phase::backward && i == 0 && s == 0) admit_next_micro_batch_prefetch(micro);
  issue_admitted_gathers();
}

void GatherSchedule::release(int i, int s, Phase phase, int micro) {
  OperatorSlice& slice = units_[i].slices[s];
  collectives_.record(ScheduleEntry::Action::computed, i, s);
  if (frees_after(slice, units_[i].choice, phase)) {
    free_storage(slice.full);
    slice.present = false;
  }
  if (phase != Phase::forward && backward_prefetch_ == BackwardPrefetch::post &&
      !keeps_gather_for_backward(slice, units_[i].choice, phase)) {
    admit_backward_prefetch(micro);
  }
  issue_admitted_gathers();
}

}  // namespace osdp::validate
