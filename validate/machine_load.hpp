// How busy the machine was around a measurement: the kernel's 1-minute load average (runnable
// and waiting tasks) against the cores there are. Measurements on CPU ranks compete with
// whatever else runs, so a validation says what load it ran under.
#pragma once

#include <optional>
#include <string>

#include "model/json_reader.hpp"

namespace osdp::validate {

struct MachineLoad {
  int cores = 0;
  std::optional<double> before;  // 1-minute load average before the measurement
  std::optional<double> after;
};

// The 1-minute load average (/proc/loadavg); nullopt where the system has none.
std::optional<double> one_minute_load_average();
int machine_cores();

// "machine load (1-minute average) 1.46 before, 2.10 after, on 2 cores"; "" when unknown.
std::string describe_load(const MachineLoad& load);
Json load_to_json(const MachineLoad& load);

}  // namespace osdp::validate
