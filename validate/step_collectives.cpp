#include "validate/step_collectives.hpp"

#include <chrono>
#include <utility>

namespace osdp::validate {

void StepCollectives::start_step() {
  exposed_s_ = 0;
  schedule_.clear();
}

void StepCollectives::wait(const CommHandle& handle) {
  if (!handle.valid() || handle.ready()) {
    handle.wait();
    return;
  }
  device_.synchronize();  // the compute queued so far is not a wait
  const auto start = std::chrono::steady_clock::now();
  handle.wait();
  device_.synchronize();  // on CUDA the wait is a stream dependency: block until it is met
  exposed_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<ScheduleEntry> StepCollectives::take_schedule() {
  std::vector<ScheduleEntry> schedule = std::move(schedule_);
  schedule_.clear();
  return schedule;
}

}  // namespace osdp::validate
