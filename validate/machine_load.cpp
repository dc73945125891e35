#include "validate/machine_load.hpp"

#include <fmt/format.h>

#include <fstream>
#include <thread>

namespace osdp::validate {

std::optional<double> one_minute_load_average() {
  std::ifstream stream("/proc/loadavg");
  double load = 0;
  if (!(stream >> load)) return std::nullopt;
  return load;
}

int machine_cores() { return static_cast<int>(std::thread::hardware_concurrency()); }

std::string describe_load(const MachineLoad& load) {
  if (!load.before && !load.after) return "";
  const auto figure = [](const std::optional<double>& value) {
    return value ? fmt::format("{:.2f}", *value) : std::string("unknown");
  };
  return fmt::format("machine load (1-minute average) {} before, {} after, on {} cores",
                     figure(load.before), figure(load.after), load.cores);
}

Json load_to_json(const MachineLoad& load) {
  Json json{{"cores", load.cores}};
  json["load_average_before"] = load.before ? Json(*load.before) : Json(nullptr);
  json["load_average_after"] = load.after ? Json(*load.after) : Json(nullptr);
  return json;
}

}  // namespace osdp::validate
