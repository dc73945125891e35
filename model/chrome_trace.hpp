// Chrome / Perfetto trace events that every trace of the project writes alike: the simulated
// step (sim/trace), the pipeline model's timeline (model/pipeline_schedule) and the measured
// step (validate/rank_runner).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace osdp {

// A complete ("X") event on `track` (tid) of `process` (pid): times in seconds, written in
// microseconds, as the trace format counts them. `args` is left out when null.
nlohmann::json chrome_complete_event(const std::string& name, std::string_view category,
                                     int process, int track, double start_s, double duration_s,
                                     nlohmann::json args = nullptr);

}  // namespace osdp
