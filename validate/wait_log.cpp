#include "validate/wait_log.hpp"

namespace osdp::validate {

std::string_view wait_cause_name(WaitCause cause) {
  switch (cause) {
    case WaitCause::tensor_parallel:
      return "tensor-parallel";
    case WaitCause::receive:
      return "receive";
    case WaitCause::send:
      return "send";
    case WaitCause::data_parallel:
      return "data-parallel";
  }
  return "?";
}

void WaitLog::add(WaitCause cause, double start_s, double duration_s) {
  if (duration_s > 0) waits_.push_back({cause, start_s, duration_s});
}

void WaitLog::wait_for(WaitCause cause, const std::vector<CommHandle>& handles) {
  const double start_s = steady_seconds();
  add(cause, start_s, wait_exposed_s(handles));
}

void WaitLog::wait_for(WaitCause cause, const CommHandle& handle) {
  wait_for(cause, std::vector<CommHandle>{handle});
}

double WaitLog::total_s() const {
  double total = 0;
  for (const CausedWait& wait : waits_) total += wait.duration_s;
  return total;
}

double WaitLog::total_s(WaitCause cause) const {
  double total = 0;
  for (const CausedWait& wait : waits_) {
    if (wait.cause == cause) total += wait.duration_s;
  }
  return total;
}

}  // namespace osdp::validate
