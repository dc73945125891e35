// Strict reading of JSON input objects: exact key sets (unknown keys are errors with a
// "did you mean" hint), typed getters that name the file and JSON path of a bad value, and
// quantities with units. Every loader in osdp reads through this.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/input_error.hpp"
#include "model/limits.hpp"
#include "model/units.hpp"

namespace osdp {

using Json = nlohmann::json;

// Limits every JSON input meets (README "Robustness"): they keep a hostile input from
// exhausting memory or the stack.
inline constexpr std::size_t max_input_bytes = 64u << 20;  // 64 MiB per file
inline constexpr int max_json_depth = 64;                  // nested arrays and objects

// Parses JSON text strictly: syntax errors, NUL bytes or anything after the document, a key
// twice in one object and nesting deeper than max_json_depth become InputErrors that name the
// file and the byte offset or JSON path.
Json parse_json_text(const std::string& text, const std::string& file);
// Reads (at most max_input_bytes of a regular file: never a FIFO, device or directory) and
// parses a file; every failure is an InputError naming the file.
Json read_json_file(const std::string& path);
// The text of a regular file of at most max_input_bytes, as read_json_file reads it.
// `format` names what the file should hold in messages ("JSON", "CSV").
std::string read_input_file(const std::string& path, const std::string& format = "JSON");

// Where a part of an input was written, for messages about it found after loading: its file and
// the JSON path of its root ("$" in a file of its own, "$.cluster" inside a scenario).
struct JsonSource {
  std::string file;
  std::string root = "$";
  // The JSON path of `key` below the root: "$.gpu" or "$.cluster.gpu".
  std::string path(const std::string& key) const { return key.empty() ? root : root + "." + key; }
};

// A short rendering of a JSON value for error messages.
std::string render_value(const Json& value);

class JsonReader {
 public:
  // `file` names the input for messages; `path` is the JSON path of `object` ("$" for root).
  JsonReader(const Json& object, std::string file, std::string path = "$");

  bool has(const std::string& key) const;
  const Json& raw(const std::string& key) const;
  std::string child_path(const std::string& key) const;
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }

  double number(const std::string& key) const;
  std::optional<double> optional_number(const std::string& key) const;
  double positive_number(const std::string& key) const;
  double non_negative_number(const std::string& key) const;
  std::optional<double> optional_non_negative_number(const std::string& key) const;
  long long integer(const std::string& key, long long min_value, long long max_value) const;
  std::optional<long long> optional_integer(const std::string& key, long long min_value,
                                            long long max_value) const;
  std::string string(const std::string& key) const;
  std::optional<std::string> optional_string(const std::string& key) const;
  // A name osdp prints (a scenario's, a cluster's, an operator's): a string without control
  // characters, which would reach the terminal raw (an escape sequence, a NUL).
  std::string name(const std::string& key) const;
  std::optional<std::string> optional_name(const std::string& key) const;
  bool boolean(const std::string& key) const;
  std::optional<bool> optional_boolean(const std::string& key) const;
  // A string among `choices`.
  std::string choice(const std::string& key, const std::vector<std::string>& choices) const;

  // A quantity: a number in SI units or a string with a unit; must be >= 0 (> 0 if positive).
  double quantity(const std::string& key, units::Dimension dimension, bool positive = true) const;
  std::optional<double> optional_quantity(const std::string& key, units::Dimension dimension,
                                          bool positive = true) const;

  // A quantity or plain number within its plausible range; the message names the range.
  double quantity(const std::string& key, units::Dimension dimension, const Range& range) const;
  std::optional<double> optional_quantity(const std::string& key, units::Dimension dimension,
                                          const Range& range) const;
  double number(const std::string& key, const Range& range) const;
  std::optional<double> optional_number(const std::string& key, const Range& range) const;

  JsonReader object(const std::string& key) const;
  std::vector<JsonReader> objects(const std::string& key) const;  // an array of objects

  // Errors about this object.
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const;
  [[noreturn]] void fail_value(const std::string& key, const std::string& value,
                               const std::string& expected) const;

  // Throws if the object has a key outside `allowed`, suggesting the nearest allowed key.
  void require_only(const std::vector<std::string>& allowed) const;

 private:
  const Json& require(const std::string& key) const;

  const Json* object_;
  std::string file_;
  std::string path_;
};

// "from 1.00 MiB to 64.0 TiB (a GPU's memory)", for messages.
std::string describe_range(const Range& range, std::optional<units::Dimension> dimension);

// Parses a quantity from a JSON value (number or string with unit). nullopt when malformed.
std::optional<double> quantity_from_json(const Json& value, units::Dimension dimension);

}  // namespace osdp
