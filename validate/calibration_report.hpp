#pragma once
// `osdp calibrate`'s report: every figure a calibration measured (collective points, operator
// times, bandwidths, straggling, contention, slicing, the tensor pairs' blocking sync) as JSON,
// and back. The forked ranks hand their result to the parent process in it, and `--report`
// writes it for the reader.

#include "model/json_reader.hpp"
#include "validate/calibration.hpp"

namespace osdp::validate {

Json calibration_report_json(const CalibrationResult& result);

// The figures of a report calibration_report_json wrote (the cluster is not part of it: the
// result's cluster stays default). Throws nlohmann::json's errors on a key it lacks.
CalibrationResult calibration_result_from_report(const Json& report);

}  // namespace osdp::validate
