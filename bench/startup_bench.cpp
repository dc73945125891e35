// startup_bench: the whole-process cost of the planner's commands, which must never pay for
// libtorch (issue 10: `osdp plan scenarios/paper-form.json` <= 50 ms and <= 50 MB peak RSS).
// Runs each command `--runs` times (default 20) after one warm-up, prints min / median / max of
// the wall time and the peak resident set, and fails (exit 1) when a median time or the largest
// peak is over its target.
//   startup_bench [--osdp PATH] [--runs N]
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_flags.hpp"

extern char** environ;

namespace {

struct Sample {
  double wall_s = 0;
  double peak_rss_bytes = 0;
};

// One run of the command, its output discarded; nullopt-like (wall_s < 0) when it failed.
Sample run_once(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  std::vector<std::string> storage = command;
  for (auto& argument : storage) argv.push_back(argument.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return {-1, 0};
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return {-1, 0};
  return {wall_s, 1024.0 * static_cast<double>(usage.ru_maxrss)};  // ru_maxrss is in KiB
}

struct Case {
  std::string label;
  std::vector<std::string> arguments;
  double max_median_wall_s;
  double max_peak_rss_bytes;
};

}  // namespace

int main(int argc, char** argv) {
  std::string osdp = OSDP_EXE;
  int runs = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument == "--osdp" && i + 1 < argc) {
      osdp = argv[++i];
    } else if (argument == "--runs" && i + 1 < argc) {
      const std::string count = argv[++i];
      const std::optional<int> parsed = ::osdp::bench::whole_number<int>(count);
      if (!parsed || *parsed < 1 || *parsed > 10000) {
        fmt::print(stderr, "startup_bench: --runs: got \"{}\": expected a count from 1 to 10000\n",
                   count);
        return 2;
      }
      runs = *parsed;
    } else {
      fmt::print(stderr, "usage: startup_bench [--osdp PATH] [--runs N]\n");
      return 2;
    }
  }
  const std::string scenarios = std::string(OSDP_SOURCE_DIR) + "/scenarios/";
  const std::vector<Case> cases{
      {"osdp --version", {"--version"}, 0.050, 50e6},
      {"osdp plan scenarios/paper-form.json", {"plan", scenarios + "paper-form.json"}, 0.050, 50e6},
      {"osdp explain scenarios/paper-form.json",
       {"explain", scenarios + "paper-form.json"},
       0.050,
       50e6},
  };
  bool all_met = true;
  fmt::print("{:<42}{:>10}{:>10}{:>10}{:>14}{:>9}\n", "command (whole process)", "min", "median",
             "max", "peak RSS", "target");
  for (const Case& c : cases) {
    std::vector<std::string> command{osdp};
    command.insert(command.end(), c.arguments.begin(), c.arguments.end());
    run_once(command);  // warm-up: page cache
    std::vector<double> walls;
    double peak = 0;
    for (int r = 0; r < runs; ++r) {
      const Sample sample = run_once(command);
      if (sample.wall_s < 0) {
        fmt::print(stderr, "startup_bench: `{}` failed\n", c.label);
        return 1;
      }
      walls.push_back(sample.wall_s);
      peak = std::max(peak, sample.peak_rss_bytes);
    }
    std::sort(walls.begin(), walls.end());
    const double median = walls[walls.size() / 2];
    const bool met = median <= c.max_median_wall_s && peak <= c.max_peak_rss_bytes;
    all_met = all_met && met;
    fmt::print("{:<42}{:>8.1f}ms{:>8.1f}ms{:>8.1f}ms{:>11.1f} MB{:>9}\n", c.label,
               1e3 * walls.front(), 1e3 * median, 1e3 * walls.back(), peak / 1e6,
               met ? "met" : "MISSED");
  }
  fmt::print("targets: median <= 50 ms and peak RSS <= 50 MB per command ({} runs each)\n", runs);
  return all_met ? 0 : 1;
}
