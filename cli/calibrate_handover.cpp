// `osdp calibrate`: measuring needs libtorch, which osdp never loads; the command hands all its
// arguments over to osdp-runtime (cli/calibrate_command.cpp), which becomes this process.
#include "cli/command.hpp"
#include "validate/runtime_process.hpp"

namespace osdp::cli {

Subcommand add_calibrate_handover(CLI::App& root) {
  CLI::App* app = root.add_subcommand(
      "calibrate",
      "Measure collectives and compute on local CPU ranks; write a cluster JSON (osdp calibrate "
      "--help lists its options)");
  // Everything after `calibrate`, --help included, is osdp-runtime's to parse.
  app->set_help_flag();
  app->prefix_command();
  app->allow_extras();
  return {app, [app]() -> int {
            std::vector<std::string> arguments{"calibrate"};
            for (const std::string& argument : app->remaining()) arguments.push_back(argument);
            validate::exec_runtime(arguments);
          }};
}

}  // namespace osdp::cli
