// The compute thread's side of a training step's collectives, shared by the sharded runtime's
// parts (gathers, gradient reductions, the optimizer step): it issues them on the communicator,
// records the order it issued them in relative to the compute (the schedule), and waits for
// them, timing the waits that block the compute as exposed communication.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "validate/communicator.hpp"
#include "validate/rank_device.hpp"

namespace osdp::validate {

// One thing the compute thread did, in order: the issue order of collectives relative to the
// operators' compute, which the prefetch policy decides (identical on every rank).
struct ScheduleEntry {
  enum class Action {
    gather,    // an all-gather of the slice was issued
    computed,  // the slice's compute in a phase ended (forward, recompute or backward)
    reduce,    // the slice's gradient reduction was issued (slice -1: the DP slices' bucket)
  };
  Action action = Action::gather;
  int op = 0;
  int slice = 0;
  friend bool operator==(const ScheduleEntry&, const ScheduleEntry&) = default;
};

// One block of the compute thread on a collective: when it began (steady_seconds(), or seconds
// from the step's start in StepMetrics), how long the compute waited, and for what (as the
// simulator's trace names it: "all-gather layer0.mlp", "reduce-scatter head").
struct CollectiveWait {
  double start_s = 0;
  double duration_s = 0;
  std::string collective;
};

class StepCollectives {
 public:
  StepCollectives(Communicator& communicator, RankDevice& device)
      : communicator_(communicator), device_(device) {}

  Communicator& communicator() { return communicator_; }
  // A new step: no schedule, no exposed time or waits yet.
  void start_step();
  void record(ScheduleEntry::Action action, int op, int slice) {
    schedule_.push_back({action, op, slice});
  }
  // Blocks until `handle`'s collective (`what` it is, for the waits' record) is done (an invalid
  // handle is done); the time the compute thread blocks, its own queued compute excluded, is
  // exposed communication.
  void wait(const CommHandle& handle, std::string_view what);
  double exposed_s() const { return exposed_s_; }
  // The step's waits so far, in order: their durations add up to exposed_s().
  const std::vector<CollectiveWait>& waits() const { return waits_; }
  // The step's schedule, leaving none.
  std::vector<ScheduleEntry> take_schedule();

 private:
  Communicator& communicator_;
  RankDevice& device_;
  std::vector<ScheduleEntry> schedule_;
  std::vector<CollectiveWait> waits_;
  double exposed_s_ = 0;
};

}  // namespace osdp::validate
