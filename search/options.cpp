#include "search/options.hpp"

namespace osdp {
namespace {

std::vector<Checkpoint> checkpoint_options(SearchSpec::CheckpointPolicy policy) {
  switch (policy) {
    case SearchSpec::CheckpointPolicy::off:
      return {Checkpoint::none};
    case SearchSpec::CheckpointPolicy::on:
      return {Checkpoint::unfused, Checkpoint::fused};
    case SearchSpec::CheckpointPolicy::automatic:
      return {Checkpoint::none, Checkpoint::unfused, Checkpoint::fused};
  }
  return {Checkpoint::none};
}

// a(x) <= b(x) for every batch x >= 0. Both are piecewise linear, bending only where a host
// floor meets its call's law: checking x = 0, every such bend and the slope beyond them is exact
// (without floors: fixed and per-sample parts).
bool dominates(const Linear& a, const Linear& b) {
  if (a.per_sample > b.per_sample || a.at_real(0) > b.at_real(0)) return false;
  for (const Linear* side : {&a, &b}) {
    for (const HostFloor& floor : side->floors) {
      if (floor.call_per_sample <= 0) continue;
      const double bend = (floor.floor_s - floor.call_fixed) / floor.call_per_sample;
      if (bend > 0 && a.at_real(bend) > b.at_real(bend)) return false;
    }
  }
  return true;
}

// a is no worse than b in time and every memory term, for every batch size.
bool dominates(const OptionCost& a, const OptionCost& b) {
  return no_slower(a.time_s, b.time_s) && dominates(a.persistent_bytes, b.persistent_bytes) &&
         dominates(a.transient_bytes, b.transient_bytes) && a.host_bytes <= b.host_bytes &&
         a.gather_buffer_bytes <= b.gather_buffer_bytes &&
         a.next_slice_buffer_bytes <= b.next_slice_buffer_bytes;
}

}  // namespace

std::vector<OperatorChoice> enumerate_choices(const CostModel& model, int op,
                                              const SearchSpec& spec) {
  bool dp_allowed = false;
  for (Mode mode : spec.modes) dp_allowed = dp_allowed || mode == Mode::dp;
  std::vector<OperatorChoice> choices;
  for (Checkpoint checkpoint : checkpoint_options(spec.checkpoint)) {
    // An operator that cannot be checkpointed runs without, whatever the policy says.
    const Checkpoint effective =
        model.workload().op(op).input_activation_bytes_per_sample ? checkpoint : Checkpoint::none;
    for (int k : spec.granularities) {
      for (Mode mode : spec.modes) {
        if (mode == Mode::dp) {
          if (k == 1) choices.push_back({Mode::dp, 1, 0, effective});
          continue;
        }
        // j of the k slices in the sharded mode, the rest DP (only when DP is allowed); their
        // states offloaded to the host as the policy says (modes that have an offload).
        const bool can_offload = describe_mode(mode).offload.has_value();
        for (int j = dp_allowed ? 1 : k; j <= k; ++j) {
          if (spec.offload != SearchSpec::OffloadPolicy::on || !can_offload) {
            choices.push_back({mode, k, j, effective, false});
          }
          if (spec.offload != SearchSpec::OffloadPolicy::off && can_offload) {
            choices.push_back({mode, k, j, effective, true});
          }
        }
      }
    }
  }
  std::vector<OperatorChoice> unique;
  for (const auto& choice : choices) {
    if (!model.valid(op, choice)) continue;
    bool seen = false;
    for (const auto& existing : unique) seen = seen || existing == choice;
    if (!seen) unique.push_back(choice);
  }
  return unique;
}

std::vector<CostedOption> costed_options(const CostModel& model, int op, const SearchSpec& spec) {
  std::vector<CostedOption> all;
  for (const auto& choice : enumerate_choices(model, op, spec)) {
    all.push_back({choice, model.option_cost(op, choice)});
  }
  std::vector<CostedOption> kept;
  for (std::size_t i = 0; i < all.size(); ++i) {
    bool dominated = false;
    for (std::size_t j = 0; j < all.size() && !dominated; ++j) {
      if (i == j || !dominates(all[j].cost, all[i].cost)) continue;
      // Of two options with identical costs keep the first.
      dominated = !dominates(all[i].cost, all[j].cost) || j < i;
    }
    if (!dominated) kept.push_back(all[i]);
  }
  return kept;
}

}  // namespace osdp
