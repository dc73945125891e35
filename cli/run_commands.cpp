#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <system_error>

#include "cli/command.hpp"
#include "model/input_error.hpp"
#include "validate/launch.hpp"

namespace osdp::cli {
namespace {

constexpr const char* command_line = "command line";

// The subcommand named `name`, or nullptr.
CLI::App* find_subcommand(CLI::App& app, const std::string& name) {
  const auto found = app.get_subcommands([&](CLI::App* sub) { return sub->get_name() == name; });
  return found.empty() ? nullptr : found.front();
}

std::vector<std::string> subcommand_names(CLI::App& app) {
  std::vector<std::string> names;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

std::string did_you_mean(const std::string& given, const std::vector<std::string>& names) {
  const std::string nearest = nearest_name(given, names);
  return nearest.empty() ? "" : " (did you mean \"" + nearest + "\"?)";
}

// `osdp bogus`: CLI11 only says a subcommand is required; name the word and the nearest one.
std::optional<std::string> unknown_subcommand(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-' || find_subcommand(app, argv[1]) != nullptr) return {};
  const std::vector<std::string> names = subcommand_names(app);
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  const InputError error(command_line, "", fmt::format("unknown command \"{}\"", argv[1]),
                         "one of " + list + did_you_mean(argv[1], names));
  return error.what();
}

// The first "--flag" after the subcommand that it does not know ("--memory-limt"), named with
// the nearest flag it does know; CLI11 only lists the arguments it did not expect.
std::optional<std::string> unknown_flag(CLI::App& app, int argc, char** argv) {
  CLI::App* sub = argc >= 2 ? find_subcommand(app, argv[1]) : nullptr;
  if (sub == nullptr) return {};
  std::vector<std::string> names;
  for (const CLI::Option* option : sub->get_options()) {
    const std::string name = option->get_name();
    if (name.rfind("--", 0) == 0) names.push_back(name);
  }
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) continue;
    const std::string flag = arg.substr(0, arg.find('='));
    if (sub->get_option_no_throw(flag) != nullptr) continue;
    const InputError error(
        command_line, flag, "an unknown flag",
        fmt::format("a flag of `osdp {}`{}", sub->get_name(), did_you_mean(flag, names)));
    return error.what();
  }
  return {};
}

// A flag that takes one value given several times (`--memory-limit 8GiB --memory-limit 9GiB`):
// CLI11 says "At Most 1 required but received 2"; say which flag and what to do.
std::optional<std::string> repeated_flag(CLI::App& app, int argc, char** argv) {
  CLI::App* sub = argc >= 2 ? find_subcommand(app, argv[1]) : nullptr;
  if (sub == nullptr) return {};
  std::map<std::string, int> given;
  std::string repeated;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) continue;
    const CLI::Option* option = sub->get_option_no_throw(arg.substr(0, arg.find('=')));
    if (option == nullptr || option->get_expected_max() > 1) continue;
    if (++given[option->get_name()] == 2 && repeated.empty()) repeated = option->get_name();
  }
  if (repeated.empty()) return {};
  const InputError error(command_line, repeated, fmt::format("it {} times", given[repeated]),
                         "it once (it takes one value; a list goes comma-separated into the "
                         "flag that takes one, e.g. --memory-limits 8GiB,12GiB)");
  return error.what();
}

// CLI11's type name of `flag` in the subcommand argv[1] names ("INT", "FLOAT", ...; empty if none).
std::string flag_type_name(CLI::App& app, const std::string& flag, int argc, char** argv) {
  CLI::App* sub = argc >= 2 ? find_subcommand(app, argv[1]) : nullptr;
  const CLI::Option* option = sub != nullptr ? sub->get_option_no_throw(flag) : nullptr;
  return option != nullptr ? option->get_type_name() : std::string();
}

// CLI11's "Could not convert: --gpus = 1e3" as osdp says it: the flag, what it got, and what
// it takes (a whole number where the option's type is an integer).
std::optional<std::string> unconvertible_value(CLI::App& app, const CLI::ParseError& error,
                                               int argc, char** argv) {
  if (dynamic_cast<const CLI::ConversionError*>(&error) == nullptr) return {};
  const std::string text = error.what();
  const std::string prefix = "Could not convert: ";
  const std::size_t equals = text.find(" = ");
  if (text.rfind(prefix, 0) != 0 || equals == std::string::npos) return {};
  const std::string flag = text.substr(prefix.size(), equals - prefix.size());
  const std::string value = text.substr(equals + 3);
  const std::string type = flag_type_name(app, flag, argc, argv);
  const bool whole = type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0;
  // A whole number CLI11 could not convert is one too large for the flag's integer.
  const bool digits =
      value.find_first_not_of("0123456789", value[0] == '-' ? 1 : 0) == std::string::npos &&
      value.size() > (value[0] == '-' ? 1u : 0u);
  const std::string expected = whole && digits ? "a smaller whole number (at most 2147483647)"
                               : whole         ? "a whole number, e.g. 1000"
                               : type.rfind("FLOAT", 0) == 0 ? "a number"
                                                             : "a value of the flag's kind";
  return InputError(command_line, flag, value, expected).what();
}

// CLI11's "--ranks: Value 0 not in range 1 to 1024" as osdp says it: "--ranks: got 0: expected
// a whole number from 1 to 1024" ("a number" where the flag is not an integer).
std::optional<std::string> out_of_range_value(CLI::App& app, const CLI::ParseError& error, int argc,
                                              char** argv) {
  if (dynamic_cast<const CLI::ValidationError*>(&error) == nullptr) return {};
  const std::string text = error.what();
  const std::string value_word = ": Value ";
  const std::string range_words = " not in range ";
  const std::string to_word = " to ";
  const std::size_t value_at = text.find(value_word);
  const std::size_t range_at = text.find(range_words);
  if (value_at == std::string::npos || range_at == std::string::npos || range_at < value_at) {
    return {};
  }
  const std::size_t to_at = text.find(to_word, range_at + range_words.size());
  if (to_at == std::string::npos) return {};
  const std::string flag = text.substr(0, value_at);
  const std::string value =
      text.substr(value_at + value_word.size(), range_at - value_at - value_word.size());
  const std::string low =
      text.substr(range_at + range_words.size(), to_at - range_at - range_words.size());
  const std::string high = text.substr(to_at + to_word.size());
  const std::string type = flag_type_name(app, flag, argc, argv);
  const bool whole = type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0;
  return InputError(
             command_line, flag, value,
             fmt::format("{} from {} to {}", whole ? "a whole number" : "a number", low, high))
      .what();
}

// CLI11's own message, with the word or flag at fault named where CLI11 does not.
std::string parse_error_message(CLI::App& app, const CLI::ParseError& error, int argc,
                                char** argv) {
  if (auto message = unknown_subcommand(app, argc, argv)) return *message;
  // Before CLI11's "--memory-limits is required": a misspelt flag is the likelier fault.
  if (auto message = unknown_flag(app, argc, argv)) return *message;
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
    if (auto message = repeated_flag(app, argc, argv)) return *message;
  }
  if (auto message = unconvertible_value(app, error, argc, argv)) return *message;
  if (auto message = out_of_range_value(app, error, argc, argv)) return *message;
  return std::string(command_line) + ": " + error.what();
}

// A flag given an empty value (`--memory-limit ''`) would read as a flag left out: refuse it.
void refuse_empty_values(const CLI::App& app) {
  for (const CLI::Option* option : app.get_options()) {
    if (option->count() == 0 || option->get_type_size_max() == 0) continue;  // flags take none
    for (const std::string& value : option->results()) {
      if (value.find_first_not_of(" \t") != std::string::npos) continue;
      const std::string name = option->get_name(option->get_name().empty());
      throw InputError(command_line, name, fmt::format("\"{}\"", value),
                       "a value (an empty value is not the same as leaving the flag out)");
    }
  }
  for (const CLI::App* sub : app.get_subcommands()) refuse_empty_values(*sub);
}

}  // namespace

int parse_and_run(CLI::App& app, const std::vector<Subcommand>& commands, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& success) {
    return app.exit(success);
  } catch (const CLI::ParseError& error) {
    // One line, as every other error (the flag's --help is where the options are listed).
    const bool known = argc >= 2 && find_subcommand(app, argv[1]) != nullptr;
    fmt::print(stderr, "osdp: error: {} (`osdp {}--help` lists the options)\n",
               parse_error_message(app, error, argc, argv),
               known ? std::string(argv[1]) + " " : std::string());
    return exit_input_error;
  }
  try {
    refuse_empty_values(app);
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
