// ddp_bench: the runtime's overhead against PyTorch DDP (not a timed test). The all-DP plan of
// scenarios/local-cpu.json runs on osdp's runtime and the same GPT, batch and ranks run under
// PyTorch DDP (bench/ddp_reference.py with Debian's python3-torch, Gloo, one compute thread
// per rank), in alternating rounds so that a machine whose speed drifts slows both alike.
// The runtime runs both ways of reducing DP gradients (one bucket after the backward, as DDP's
// 25 MB buckets do for this 17 MB model; each operator's after its own backward). Prints each
// side's median iteration time with its middle half and the ratios; target: the runtime with
// one bucket within 1.1x DDP. Exit 0 when met (or when no Python with torch is found: skipped,
// said so), 1 when missed, 2 on bad input.
//   ddp_bench [SCENARIO] [--rounds R] [--iterations N] [--bucket-mb MB]
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_flags.hpp"
#include "model/scenario.hpp"
#include "validate/gpt_shape.hpp"
#include "validate/machine_load.hpp"
#include "validate/measurement.hpp"
#include "validate/rank_runner.hpp"
#include "validate/validation_options.hpp"

using namespace osdp;

namespace {

struct Arguments {
  std::string scenario_path = std::string(OSDP_SOURCE_DIR) + "/scenarios/local-cpu.json";
  int rounds = 5;
  int iterations = 20;  // measured per round and side
  double bucket_mb = 25;
};

// The first Python that imports torch: $OSDP_PYTHON, python3 on the PATH, Debian's own.
std::string python_with_torch() {
  std::vector<std::string> candidates;
  if (const char* chosen = std::getenv("OSDP_PYTHON")) candidates.emplace_back(chosen);
  candidates.emplace_back("python3");
  candidates.emplace_back("/usr/bin/python3");
  for (const std::string& python : candidates) {
    const std::string probe = python + " -c 'import torch.distributed' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return python;
  }
  return "";
}

// Runs `command` and returns its standard output; throws when it fails.
std::string output_of(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot start: " + command);
  std::string output;
  char buffer[4096];
  while (const std::size_t read = std::fread(buffer, 1, sizeof buffer, pipe)) {
    output.append(buffer, read);
  }
  if (::pclose(pipe) != 0) throw std::runtime_error("failed: " + command);
  return output;
}

std::vector<double> ddp_iteration_times(const std::string& python, const validate::GptShape& shape,
                                        int batch, int ranks, int warmup, int iterations,
                                        double bucket_mb) {
  const std::string command = fmt::format(
      "{} {}/bench/ddp_reference.py --layers {} --hidden {} --heads {} --sequence {} "
      "--vocabulary {} --batch {} --ranks {} --warmup {} --iterations {} --bucket-mb {}",
      python, OSDP_SOURCE_DIR, shape.layers, shape.hidden, shape.heads, shape.sequence_length,
      shape.vocabulary, batch, ranks, warmup, iterations, bucket_mb);
  const Json result = Json::parse(output_of(command));
  return result.at("iteration_times_s").get<std::vector<double>>();
}

std::string describe(const validate::Spread& spread) {
  return fmt::format("{:.2f} ms (middle half {:.2f}-{:.2f})", 1e3 * spread.median_s,
                     1e3 * spread.first_quartile_s, 1e3 * spread.third_quartile_s);
}

// A flag's value, all of it a number; throws otherwise.
template <class Number>
Number number_of(const std::string& flag, const std::string& text) {
  const std::optional<Number> value = bench::whole_number<Number>(text);
  if (!value) {
    throw std::invalid_argument(fmt::format("{}: got \"{}\": expected a number", flag, text));
  }
  return *value;
}

Arguments parse(int argc, char** argv) {
  Arguments arguments;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    const bool has_value = i + 1 < argc;
    if (argument == "--rounds" && has_value) {
      arguments.rounds = number_of<int>(argument, argv[++i]);
    } else if (argument == "--iterations" && has_value) {
      arguments.iterations = number_of<int>(argument, argv[++i]);
    } else if (argument == "--bucket-mb" && has_value) {
      arguments.bucket_mb = number_of<double>(argument, argv[++i]);
    } else if (!argument.empty() && argument[0] != '-') {
      arguments.scenario_path = argument;
    } else {
      throw std::invalid_argument(argument);
    }
  }
  if (arguments.rounds < 1 || arguments.iterations < 1 || arguments.bucket_mb <= 0) {
    throw std::invalid_argument("rounds, iterations and bucket size must be positive");
  }
  return arguments;
}

}  // namespace

int main(int argc, char** argv) {
  Arguments arguments;
  try {
    arguments = parse(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr,
                 "ddp_bench: bad argument (%s)\nusage: ddp_bench [SCENARIO] [--rounds R] "
                 "[--iterations N] [--bucket-mb MB]\n",
                 error.what());
    return 2;
  }
  const std::string python = python_with_torch();
  if (python.empty()) {
    std::printf(
        "ddp_bench: skipped: no Python that imports torch (install Debian's python3-torch, or "
        "set OSDP_PYTHON)\n");
    return 0;
  }
  try {
    const Scenario scenario = load_scenario(arguments.scenario_path);
    const validate::GptShape shape = validate::require_gpt_shape(scenario, scenario.file);
    validate::ValidationOptions options = validate::read_validation_options(scenario);
    options.iterations = arguments.iterations;
    options.rounds = 1;
    options.accumulation_steps = 1;
    const int ranks = scenario.cluster.ranks;
    Plan all_dp;
    all_dp.batch_size = options.batch_size;
    all_dp.choices.assign(scenario.workload->size(), OperatorChoice::whole(Mode::dp));
    validate::MachineLoad load;
    load.cores = validate::machine_cores();
    load.before = validate::one_minute_load_average();
    // The runtime twice: each DP operator's all-reduce after its own backward (overlapping the
    // backward), and every DP gradient in one bucket after the backward (what DDP's 25 MB
    // buckets make of a model this small: the first 1 MB bucket aside, one all-reduce).
    std::vector<double> per_operator_s;
    std::vector<double> bucket_s;
    std::vector<double> ddp_s;
    constexpr int kSides = 3;
    for (int round = 0; round < arguments.rounds; ++round) {
      // The sides take turns, each round starting with another.
      for (int turn = 0; turn < kSides; ++turn) {
        const int side = (turn + round) % kSides;
        if (side < 2) {
          validate::ValidationOptions side_options = options;
          side_options.dp_all_reduce_after_backward = side == 1;
          auto measured = validate::run_measurements(shape, {{"all-dp", all_dp}}, ranks,
                                                     side_options, scenario.cluster.gpus_per_node);
          if (!measured) return 0;  // not rank 0 under torchrun
          const std::vector<double> times = measured->front().slowest_iteration_times_s();
          std::vector<double>& into = side == 0 ? per_operator_s : bucket_s;
          into.insert(into.end(), times.begin(), times.end());
        } else {
          const std::vector<double> times = ddp_iteration_times(
              python, shape, options.batch_size, ranks, options.warmup_iterations,
              arguments.iterations, arguments.bucket_mb);
          ddp_s.insert(ddp_s.end(), times.begin(), times.end());
        }
      }
    }
    load.after = validate::one_minute_load_average();
    const validate::Spread per_operator = validate::spread_of(per_operator_s);
    const validate::Spread bucket = validate::spread_of(bucket_s);
    const validate::Spread ddp = validate::spread_of(ddp_s);
    auto ratio_text = [&](const validate::Spread& runtime) {
      return fmt::format("{:.3f}x DDP (middle halves {:.3f}x .. {:.3f}x)",
                         runtime.median_s / ddp.median_s,
                         runtime.first_quartile_s / ddp.third_quartile_s,
                         runtime.third_quartile_s / ddp.first_quartile_s);
    };
    fmt::print(
        "runtime overhead on {} ({} ranks, batch {} per rank, {} rounds x {} iterations a side)\n"
        "  PyTorch DDP ({} MB buckets)                     {}\n"
        "  osdp runtime, all-DP, one bucket after backward  {}  {}\n"
        "  osdp runtime, all-DP, per operator (overlapping) {}  {}\n{}\n",
        scenario.name, ranks, options.batch_size, arguments.rounds, arguments.iterations,
        arguments.bucket_mb, describe(ddp), describe(bucket), ratio_text(bucket),
        describe(per_operator), ratio_text(per_operator), validate::describe_load(load));
    // The like-for-like pair: the runtime reducing as DDP does for this model.
    const bool met = bucket.median_s / ddp.median_s <= 1.10;
    fmt::print("target: the runtime (one bucket, as DDP here) within 1.1x DDP: {}\n",
               met ? "met" : "MISSED");
    return met ? 0 : 1;
  } catch (const InputError& error) {
    std::fprintf(stderr, "ddp_bench: %s\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddp_bench: %s\n", error.what());
    return 1;
  }
}
