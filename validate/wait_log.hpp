// Where a 3D rank's compute thread waited for communication during a step (validate/
// parallel_gpt): each wait's start, length and cause, and their totals by cause. The trace's
// "compute waits" row draws the waits; the validator's exposed communication is their total.
#pragma once

#include <string_view>
#include <type_traits>
#include <vector>

#include "validate/communicator.hpp"

namespace osdp::validate {

enum class WaitCause {
  tensor_parallel,  // the tensor group's sums, sequence gathers and scatters, the loss's maxima
  receive,          // a receive from a neighbouring stage: the pipeline's bubble on this stage
  send,             // the sends still in flight when the stage's last pass is done
  data_parallel,    // the data-parallel group's gathers and gradient reductions
};

// "tensor-parallel", "receive", "send", "data-parallel".
std::string_view wait_cause_name(WaitCause cause);

struct CausedWait {
  WaitCause cause = WaitCause::data_parallel;
  double start_s = 0;  // steady_seconds()
  double duration_s = 0;
};

class WaitLog {
 public:
  void clear() { waits_.clear(); }
  // A wait that began at `start_s` (steady_seconds()); one of no length is not kept (the
  // compute did not block).
  void add(WaitCause cause, double start_s, double duration_s);
  // Waits for `handles` to complete and records the time the compute was held (wait_exposed_s).
  void wait_for(WaitCause cause, const std::vector<CommHandle>& handles);
  void wait_for(WaitCause cause, const CommHandle& handle);
  // Runs `blocking` (a collective the compute waits for) and records how long it took.
  template <typename Blocking>
  auto timed(WaitCause cause, Blocking blocking) {
    const double start_s = steady_seconds();
    if constexpr (std::is_void_v<std::invoke_result_t<Blocking>>) {
      blocking();
      add(cause, start_s, steady_seconds() - start_s);
    } else {
      auto result = blocking();
      add(cause, start_s, steady_seconds() - start_s);
      return result;
    }
  }

  double total_s() const;
  double total_s(WaitCause cause) const;
  const std::vector<CausedWait>& waits() const { return waits_; }

 private:
  std::vector<CausedWait> waits_;
};

}  // namespace osdp::validate
