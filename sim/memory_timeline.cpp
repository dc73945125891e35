#include "sim/memory_timeline.hpp"

namespace osdp::sim {

void MemoryTimeline::change(double time_s, double delta_bytes, MemoryCategory category, int op,
                            int item) {
  live_ += delta_bytes;
  live_by_[static_cast<int>(category)] += delta_bytes;
  const MemoryEvent event{time_s, delta_bytes, live_, category, op, item};
  if (record_) events_.push_back(event);
  // Strictly above (beyond rounding): the first time the peak is reached is the one reported.
  if (delta_bytes > 0 && live_ > peak_ * (1 + 1e-12)) {
    peak_ = live_;
    peak_time_s_ = time_s;
    peak_event_ = event;
    peak_by_ = live_by_;
  }
}

}  // namespace osdp::sim
