// User-facing input errors: one message naming the file, the JSON path, the bad value and what
// was expected. The command line maps InputError to exit code 2.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace osdp {

class InputError : public std::runtime_error {
 public:
  InputError(std::string file, std::string json_path, std::string value, std::string expected);

  const std::string& file() const { return file_; }
  const std::string& json_path() const { return json_path_; }
  const std::string& value() const { return value_; }
  const std::string& expected() const { return expected_; }

 private:
  std::string file_;
  std::string json_path_;
  std::string value_;
  std::string expected_;
};

// A well-formed setup that has no answer (e.g. no plan fits in memory). Exit code 3.
class InfeasibleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(const std::string& a, const std::string& b);

// The name among `names` nearest to `given`, ignoring case ("HEAD" -> "head"), when it is close
// enough to be a typo (at most max(2, a third of its length) edits); empty if none is.
std::string nearest_name(const std::string& given, const std::vector<std::string>& names);

}  // namespace osdp
