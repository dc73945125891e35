// libFuzzer harness for the command line: the input is a list of arguments (one per line) given
// to `osdp plan`, `osdp explain` or `osdp layout` (the first byte picks which) on the tiny CPU
// scenario. Any argument list must end in exit code 0, 2 or 3 through parse_and_run: an
// exception escaping it, a crash, a leak or a sanitizer report is a bug. Arguments that would
// write files (--out, --trace) or lift the work guard (--force) are dropped, and the search gets
// a one-second limit, so that every run stays short.
//   cmake --preset fuzz && cmake --build --preset fuzz
//   ./build/fuzz/tests/fuzz/fuzz_command_line tests/fuzz/command_line_corpus -max_total_time=60
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/command.hpp"

#ifndef OSDP_SOURCE_DIR
#error "OSDP_SOURCE_DIR must name the source tree (tests/fuzz/CMakeLists.txt)"
#endif

namespace {

constexpr std::size_t max_arguments = 12;
constexpr std::size_t max_argument_chars = 64;

bool dropped(const std::string& argument) {
  for (const char* word : {"--out", "--trace", "--force", "--report", "--time-limit"}) {
    if (argument.rfind(word, 0) == 0) return true;
  }
  return false;
}

// The commands print tables: keep the fuzzer's own output readable.
void silence_output_once() {
  static const bool silenced = [] {
    std::fflush(stdout);
    std::fflush(stderr);
    const bool quiet = std::getenv("OSDP_FUZZ_VERBOSE") == nullptr;
    if (quiet) {
      (void)std::freopen("/dev/null", "w", stdout);
    }
    return quiet;
  }();
  (void)silenced;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  silence_output_once();
  static const char* const subcommands[] = {"plan", "explain", "layout"};
  std::vector<std::string> arguments{
      "osdp", subcommands[data[0] % 3],
      std::string(OSDP_SOURCE_DIR) +
          (data[0] % 3 == 2 ? "/scenarios/local-cpu-3d.json" : "/scenarios/local-cpu-tiny.json"),
      "--time-limit", "1s"};
  std::string current;
  auto take = [&] {
    if (arguments.size() - 5 < max_arguments && !dropped(current)) arguments.push_back(current);
    current.clear();
  };
  for (std::size_t i = 1; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\n') {
      take();
    } else if (current.size() < max_argument_chars) {
      current += c;
    }
  }
  if (!current.empty()) take();

  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);

  using namespace osdp::cli;
  CLI::App app{"osdp"};
  app.require_subcommand(1);
  std::vector<Subcommand> commands{add_plan_command(app), add_explain_command(app),
                                   add_layout_command(app)};
  const int code = parse_and_run(app, commands, static_cast<int>(arguments.size()), argv.data());
  if (code != 0 && code != 2 && code != 3) {
    std::fprintf(stderr, "fuzz_command_line: exit code %d\n", code);
    std::abort();
  }
  return 0;
}
