#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <system_error>

#include "cli/command.hpp"
#include "model/input_error.hpp"
#include "validate/launch.hpp"

namespace osdp::cli {

int parse_and_run(CLI::App& app, const std::vector<Subcommand>& commands, int argc, char** argv) {
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
      if (!command.app->parsed()) continue;
      const int code = command.run();
      // What the command printed must have reached stdout (a full disk, /dev/full, a closed
      // descriptor): a lost output is a failed run, not a success.
      if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
        fmt::print(stderr, "osdp: error: cannot write the output to stdout ({})\n",
                   std::strerror(errno));
        return exit_input_error;
      }
      return code;
    }
  } catch (const InputError& error) {
    fmt::print(stderr, "osdp: error: {}\n", error.what());
    return exit_input_error;
  } catch (const InfeasibleError& error) {
    fmt::print(stderr, "osdp: {}\n", error.what());
    return exit_infeasible;
  } catch (const validate::RunFailure& failure) {
    fmt::print(stderr, "osdp: {}\n", failure.what());
    return failure.interrupted_by_signal() != 0 ? 128 + failure.interrupted_by_signal() : 1;
  } catch (const std::system_error& error) {
    // Writing the output (fmt to a full stdout) or a path the system refuses (std::filesystem).
    fmt::print(stderr, "osdp: error: {}\n", error.what());
    return exit_input_error;
  } catch (const std::exception& error) {
    fmt::print(stderr, "osdp: internal error: {}\n", error.what());
    return 1;
  }
  return exit_input_error;
}

}  // namespace osdp::cli
