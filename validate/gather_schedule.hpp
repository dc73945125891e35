// When the sharded runtime gathers a slice's parameters and frees them again (FSDP's
// all-gather / free scheduling).
//
//   zdp (and hsdp)  gathered before forward and again before backward, freed after each;
//   z2              gathered once in forward and kept until the slice's backward;
//   checkpointed    the recompute before backward gathers too: unfused frees after it and
//                   gathers again for backward; fused keeps the recompute's gather for backward.
// Gathers follow one precomputed order, identical on every rank: forward gathers are prefetched
// `prefetch_depth` ahead, backward gathers one ahead as `backward_prefetch` says (FSDP's
// BackwardPrefetch, model/prefetch_policy.hpp); with depth 1 at most two gathered units are in
// flight. With gradient accumulation the order repeats once per micro-batch, and the next
// micro-batch's forward prefetch opens when the last backward of the one before starts.
#pragma once

#include <cstddef>
#include <vector>

#include "model/plan.hpp"
#include "model/prefetch_policy.hpp"
#include "validate/parameter_shards.hpp"
#include "validate/step_collectives.hpp"

namespace osdp::validate {

// The phases in which a unit's slices compute.
enum class Phase { forward, recompute, backward };

bool is_checkpointed(const OperatorChoice& choice);

// Whether a sharded slice is freed after use in `phase`.
bool frees_after(const OperatorSlice& slice, const OperatorChoice& choice, Phase phase);

class GatherSchedule {
 public:
  // The order of gathers for `units` (which must outlive the schedule); `micro_batches` per
  // step.
  GatherSchedule(std::vector<RuntimeUnit>& units, StepCollectives& collectives, int prefetch_depth,
                 BackwardPrefetch backward_prefetch, int micro_batches);

  // Opens the first forward prefetch window of a step and issues its gathers.
  void start_step();
  // Before slice s of unit i computes in `phase` of micro-batch `micro`: waits for its gather
  // (issuing it if the window has not) and issues the gathers the window admits then.
  void acquire(int i, int s, Phase phase, int micro);
  // After slice s of unit i computed in `phase`, before its gradient reduction: frees it if
  // the phase ends its use, and issues the gathers admitted then.
  void release(int i, int s, Phase phase, int micro);
  // Throws unless the step consumed every planned gather.
  void check_step_consumed() const;

 private:
  // A gather in the order they are consumed, with the phase consuming it.
  struct GatherEvent {
    int op;
    int slice;
    Phase phase;
  };

  template <typename Visit>
  void walk(Visit visit) const;
  void build_gather_order();
  void issue_gather(OperatorSlice& slice);
  void issue_admitted_gathers();
  void admit_gathers_up_to(std::size_t limit);
  std::size_t step_gathers() const;
  const GatherEvent& gather_event(std::size_t e) const;
  std::size_t micro_batch_start(int micro) const;
  void admit_forward_prefetch(int micro);
  void admit_backward_prefetch(int micro);
  void admit_next_micro_batch_prefetch(int micro);
  bool is_next_gather(int i, int s) const;
  void consume_gather(int i, int s);

  std::vector<RuntimeUnit>& units_;
  StepCollectives& collectives_;
  int prefetch_depth_ = 1;
  BackwardPrefetch backward_prefetch_ = BackwardPrefetch::pre;
  int micro_batches_ = 1;
  // One micro-batch's gathers; a step runs them micro_batches times, and the indices below
  // count over the whole step (event e is gather_order_[e % gather_order_.size()]).
  std::vector<GatherEvent> gather_order_;
  std::size_t forward_gathers_ = 0;  // the first ones in gather_order_
  std::size_t next_gather_ = 0;      // next event to consume
  std::size_t issued_gather_ = 0;    // next event to issue
  std::size_t issue_limit_ = 0;      // events before it may be issued now (the prefetch window)
};

}  // namespace osdp::validate
