// What the `osdp` front end asks of the libtorch runtime (osdp-runtime), and what it answers.
// The front end loads the scenario, chooses and checks the plans; the runtime only trains them.
// Both sides are osdp, but the request is still read strictly: it is a file on disk.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/json_reader.hpp"
#include "validate/gpt_shape.hpp"
#include "validate/measurement.hpp"
#include "validate/validation_options.hpp"

namespace osdp::validate {

struct MeasureRequest {
  GptShape shape;
  std::vector<PlanRun> plans;
  int local_ranks = 1;  // ranks to fork when not started by torchrun (or Slurm, mpirun)
  ValidationOptions options;
  int gpus_per_node = 1;
  std::string trace_directory;  // empty: no measured traces
};

Json measure_request_to_json(const MeasureRequest& request);
MeasureRequest measure_request_from_json(const Json& json, const std::string& file);

// nullopt on ranks other than the reporting one (rank 0 under torchrun).
Json measure_response_to_json(const std::optional<std::vector<PlanMeasurement>>& measurements,
                              const std::vector<ComputeCheck>& compute_check = {});
// `compute_check`, when given, receives the response's (empty when it has none).
std::optional<std::vector<PlanMeasurement>> measure_response_from_json(
    const Json& json, const std::string& file, std::vector<ComputeCheck>* compute_check = nullptr);

Json gpt_shape_to_json(const GptShape& shape);
GptShape gpt_shape_from_json(const JsonReader& reader);
ValidationOptions validation_options_from_json(const JsonReader& reader);

}  // namespace osdp::validate
