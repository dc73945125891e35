// Plans as JSON: {"batch_size": b, ["accumulation_steps": m,] "operators": [{"name", "mode",
// "slices", "sharded_slices", "checkpoint"}]}. Every operator of the workload must appear
// exactly once, by name; `osdp plan --json` documents (which carry figures too) read back as-is.
// A plan with FSDP units says "units": [operators per unit, in execution order] and names the
// units ("layer0.attention..layer0.mlp") instead of the operators. `workload` is the model as the
// scenario has it (unwrapped); both functions wrap it as the plan says.
#pragma once

#include <string>

#include "model/cost_model.hpp"
#include "model/json_reader.hpp"
#include "model/plan.hpp"
#include "model/workload.hpp"

namespace osdp {

Plan load_plan(const JsonReader& reader, const Workload& workload, const CostModel& cost_model);
Plan load_plan_file(const std::string& path, const Workload& workload, const CostModel& cost_model);
Json plan_to_json(const Plan& plan, const Workload& workload);

}  // namespace osdp
