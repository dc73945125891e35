// osdp: plan, simulate and validate sharded data-parallel training.
#include <vector>

#include "cli/command.hpp"

int main(int argc, char** argv) {
  using namespace osdp::cli;
  CLI::App app{"osdp: plan, simulate and validate sharded data-parallel training (OSDP)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "osdp 0.1.0");

  std::vector<Subcommand> commands{
      add_plan_command(app),       add_sweep_command(app),    add_explain_command(app),
      add_layout_command(app),     add_report_command(app),
#ifdef OSDP_WITH_SIM
      add_simulate_command(app),   add_fit_command(app),      add_predict_command(app),
#endif
      add_calibrate_handover(app), add_validate_command(app),
  };

  return parse_and_run(app, commands, argc, argv);
}
