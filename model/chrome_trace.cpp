#include "model/chrome_trace.hpp"

#include <utility>

namespace osdp {

nlohmann::json chrome_complete_event(const std::string& name, std::string_view category,
                                     int process, int track, double start_s, double duration_s,
                                     nlohmann::json args) {
  constexpr double us_per_s = 1e6;
  nlohmann::json event = {{"ph", "X"},
                          {"name", name},
                          {"cat", category},
                          {"pid", process},
                          {"tid", track},
                          {"ts", start_s * us_per_s},
                          {"dur", duration_s * us_per_s}};
  if (!args.is_null()) event["args"] = std::move(args);
  return event;
}

}  // namespace osdp
