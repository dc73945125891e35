// One rank's memory over the iteration: every allocation and free with its cause, the peak,
// when it happened, which allocation reached it and what was live then (by category).
#pragma once

#include <array>
#include <vector>

#include "sim/simulate.hpp"

namespace osdp::sim {

struct MemoryEvent {
  double time_s = 0;
  double delta_bytes = 0;
  double live_bytes = 0;
  MemoryCategory category = MemoryCategory::model_states;
  int op = -1;
  int item = -1;  // program item that caused it (-1: initial)
};

class MemoryTimeline {
 public:
  explicit MemoryTimeline(bool record_events) : record_(record_events) {}

  void change(double time_s, double delta_bytes, MemoryCategory category, int op, int item);

  double live_bytes() const { return live_; }
  double peak_bytes() const { return peak_; }
  double peak_time_s() const { return peak_time_s_; }
  const MemoryEvent& peak_event() const { return peak_event_; }
  const std::array<double, memory_categories>& peak_breakdown() const { return peak_by_; }
  const std::vector<MemoryEvent>& events() const { return events_; }

 private:
  bool record_;
  double live_ = 0;
  double peak_ = 0;
  double peak_time_s_ = 0;
  MemoryEvent peak_event_;
  std::array<double, memory_categories> live_by_{};
  std::array<double, memory_categories> peak_by_{};
  std::vector<MemoryEvent> events_;
};

}  // namespace osdp::sim
