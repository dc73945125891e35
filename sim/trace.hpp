// Chrome trace JSON (the Trace Event Format; Perfetto and chrome://tracing open it) of a
// simulated iteration: one process per rank, a "compute" track, one track per communication
// lane and a "compute waits" track (the compute's waits for collectives), a "memory" counter track
// (live bytes by category, stacked) and an instant event per allocation or free with its cause.
// Times ("ts", "dur") are in microseconds, as the format requires; memory is in bytes.
#pragma once

#include <string>

#include "model/workload.hpp"
#include "sim/executor.hpp"

namespace osdp::sim {

// Ranks 0 .. max_ranks - 1 only (a trace of thousands of ranks is too large to open).
std::string chrome_trace(const Executor& executor, const Workload& workload, int max_ranks);

}  // namespace osdp::sim
