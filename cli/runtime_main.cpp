// osdp-runtime: the part of osdp that loads libtorch, in a process of its own. `osdp calibrate`
// becomes this program; `osdp validate` starts it to measure plans and reads back its answer:
//   osdp-runtime calibrate [options of osdp calibrate]
//   osdp-runtime measure REQUEST.json RESPONSE.json
// Exit codes as osdp's (0, 1 a run failed, 2 bad input), and 128 + the signal when a SIGINT or
// SIGTERM stopped the run (the ranks are stopped and the temporary files removed first).
#include <memory>
#include <vector>

#include "cli/command.hpp"
#include "model/atomic_file.hpp"
#include "validate/rank_runner.hpp"
#include "validate/runtime_request.hpp"

namespace {

using namespace osdp;

struct MeasureFiles {
  std::string request;
  std::string response;
};

int measure(const MeasureFiles& files) {
  const validate::MeasureRequest request =
      validate::measure_request_from_json(read_json_file(files.request), files.request);
  for (const auto& run : request.plans) {
    if (run.layout) continue;  // ParallelGpt checks its layout when it is built
    validate::check_runnable(request.shape, run.plan, request.local_ranks, request.gpus_per_node,
                             run.name);
  }
  std::vector<validate::ComputeCheck> compute_check;
  const auto measurements =
      validate::run_measurements(request.shape, request.plans, request.local_ranks, request.options,
                                 request.gpus_per_node, request.trace_directory, &compute_check);
  write_file_atomically(files.response,
                        validate::measure_response_to_json(measurements, compute_check).dump());
  return cli::exit_ok;
}

cli::Subcommand add_measure_command(CLI::App& root) {
  auto files = std::make_shared<MeasureFiles>();
  CLI::App* app = root.add_subcommand(
      "measure", "Train the plans of a request written by `osdp validate`; write the figures");
  app->add_option("request", files->request, "Request JSON")->required();
  app->add_option("response", files->response, "Where to write the measured figures")->required();
  return {app, [files]() { return measure(*files); }};
}

}  // namespace

int main(int argc, char** argv) {
  using namespace osdp::cli;
  CLI::App app{"osdp-runtime: the libtorch runtime of osdp (started by osdp validate / calibrate)"};
  // Users reach it as `osdp calibrate` (osdp hands the command over): usage lines say osdp.
  app.name("osdp");
  app.require_subcommand(1);
  std::vector<Subcommand> commands{add_calibrate_command(app), add_measure_command(app)};
  return parse_and_run(app, commands, argc, argv);
}
