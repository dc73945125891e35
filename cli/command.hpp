// The `osdp` front end: each subcommand is a small unit in its own file that registers its
// options on the CLI11 app and returns the action to run when it is selected.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace osdp::cli {

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;  // returns the process exit code
};

// Exit codes, documented in README.md (and 128 + the signal when SIGINT or SIGTERM stopped a
// run of ranks).
inline constexpr int exit_ok = 0;
inline constexpr int exit_input_error = 2;  // bad input: file, JSON path, value, what was expected
inline constexpr int exit_infeasible = 3;   // well-formed, but no plan fits in memory

// Parses the command line and runs the chosen subcommand, turning what it throws into the exit
// codes above and one message on stderr. Both executables, osdp and osdp-runtime, end here.
int parse_and_run(CLI::App& app, const std::vector<Subcommand>& commands, int argc, char** argv);

Subcommand add_plan_command(CLI::App& root);
Subcommand add_sweep_command(CLI::App& root);
Subcommand add_explain_command(CLI::App& root);
Subcommand add_layout_command(CLI::App& root);
Subcommand add_report_command(CLI::App& root);
#ifdef OSDP_WITH_SIM
Subcommand add_simulate_command(CLI::App& root);
Subcommand add_fit_command(CLI::App& root);
Subcommand add_predict_command(CLI::App& root);
#endif
// Both need the libtorch runtime, osdp-runtime: `validate` starts it to measure plans, and
// `calibrate` hands its arguments over to it (osdp itself never loads libtorch).
Subcommand add_validate_command(CLI::App& root);
Subcommand add_calibrate_handover(CLI::App& root);
// osdp-runtime's own `calibrate` (cli/calibrate_command.cpp, linked into osdp-runtime only).
Subcommand add_calibrate_command(CLI::App& root);

}  // namespace osdp::cli
