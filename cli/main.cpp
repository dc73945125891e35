// osdp: plan, simulate and validate sharded data-parallel training.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <vector>

#include "cli/command.hpp"
#include "model/input_error.hpp"

int main(int argc, char** argv) {
  using namespace osdp::cli;
  CLI::App app{"osdp: plan, simulate and validate sharded data-parallel training (OSDP)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "osdp 0.1.0");

  std::vector<Subcommand> commands{
      add_plan_command(app),      add_sweep_command(app),    add_explain_command(app),
#ifdef OSDP_WITH_SIM
      add_simulate_command(app),  add_fit_command(app),      add_predict_command(app),
#endif
      add_calibrate_handover(app),
      add_validate_command(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& success) {
    return app.exit(success);
  } catch (const CLI::ParseError& error) {
    app.exit(error);
    return exit_input_error;
  }

  try {
    for (const auto& command : commands) {
      if (command.app->parsed()) return command.run();
    }
  } catch (const osdp::InputError& error) {
    fmt::print(stderr, "osdp: error: {}\n", error.what());
    return exit_input_error;
  } catch (const osdp::InfeasibleError& error) {
    fmt::print(stderr, "osdp: {}\n", error.what());
    return exit_infeasible;
  } catch (const std::exception& error) {
    fmt::print(stderr, "osdp: internal error: {}\n", error.what());
    return 1;
  }
  return exit_input_error;
}
