#include "validate/step_collectives.hpp"

#include <algorithm>
#include <utility>

namespace osdp::validate {

void StepCollectives::start_step() {
  exposed_s_ = 0;
  schedule_.clear();
  waits_.clear();
}

void StepCollectives::wait(const CommHandle& handle, std::string_view what) {
  if (!handle.valid() || handle.ready()) {
    handle.wait();
    return;
  }
  device_.synchronize();  // the compute queued so far is not a wait
  const double start_s = steady_seconds();
  handle.wait();
  const std::optional<double> completed_s = handle.completed_s();
  device_.synchronize();  // on CUDA the wait is a stream dependency: block until it is met
  // Until the collective completed (a CPU rank's thread may wait for a core after it; it may
  // also have completed between the readiness check and the clock's reading).
  const double waited_s = std::max(0.0, completed_s.value_or(steady_seconds()) - start_s);
  exposed_s_ += waited_s;
  if (waited_s > 0) waits_.push_back({start_s, waited_s, std::string(what)});
}

std::vector<ScheduleEntry> StepCollectives::take_schedule() {
  std::vector<ScheduleEntry> schedule = std::move(schedule_);
  schedule_.clear();
  return schedule;
}

}  // namespace osdp::validate
