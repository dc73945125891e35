#include "model/json_reader.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace osdp {

Json parse_json_text(const std::string& text, const std::string& file) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& error) {
    throw InputError(file, "", fmt::format("text that does not parse at byte {}", error.byte),
                     "valid JSON");
  } catch (const Json::exception& error) {
    // e.g. a number too large for a double ("9e511").
    throw InputError(file, "", "JSON the parser refuses (" + std::string(error.what()) + ")",
                     "valid JSON with finite numbers");
  }
}

Json read_json_file(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw InputError(path, "", "a path that cannot be opened", "a readable JSON file");
  std::ostringstream contents;
  contents << stream.rdbuf();
  return parse_json_text(contents.str(), path);
}

std::string render_value(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

JsonReader::JsonReader(const Json& object, std::string file, std::string path)
    : object_(&object), file_(std::move(file)), path_(std::move(path)) {
  if (!object.is_object()) {
    throw InputError(file_, path_, render_value(object), "a JSON object");
  }
}

bool JsonReader::has(const std::string& key) const {
  return object_->contains(key) && !(*object_)[key].is_null();
}

const Json& JsonReader::raw(const std::string& key) const { return require(key); }

std::string JsonReader::child_path(const std::string& key) const { return path_ + "." + key; }

const Json& JsonReader::require(const std::string& key) const {
  if (!has(key)) throw InputError(file_, child_path(key), "nothing", "this key to be present");
  return (*object_)[key];
}

void JsonReader::fail(const std::string& key, const std::string& expected) const {
  const std::string value = has(key) ? render_value((*object_)[key]) : std::string("nothing");
  throw InputError(file_, key.empty() ? path_ : child_path(key), value, expected);
}

void JsonReader::fail_value(const std::string& key, const std::string& value,
                            const std::string& expected) const {
  throw InputError(file_, key.empty() ? path_ : child_path(key), value, expected);
}

double JsonReader::number(const std::string& key) const {
  const Json& value = require(key);
  if (!value.is_number()) fail(key, "a number");
  const double result = value.get<double>();
  if (!std::isfinite(result)) fail(key, "a finite number");
  return result;
}

std::optional<double> JsonReader::optional_number(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return number(key);
}

double JsonReader::positive_number(const std::string& key) const {
  const double value = number(key);
  if (!(value > 0.0)) fail(key, "a number greater than zero");
  return value;
}

double JsonReader::non_negative_number(const std::string& key) const {
  const double value = number(key);
  if (value < 0.0) fail(key, "a number that is zero or more");
  return value;
}

std::optional<double> JsonReader::optional_non_negative_number(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return non_negative_number(key);
}

long long JsonReader::integer(const std::string& key, long long min_value,
                              long long max_value) const {
  const Json& value = require(key);
  const std::string range = fmt::format("an integer from {} to {}", min_value, max_value);
  if (value.is_number_integer()) {
    const long long result =
        value.is_number_unsigned()
            ? static_cast<long long>(std::min<unsigned long long>(
                  value.get<unsigned long long>(),
                  static_cast<unsigned long long>(std::numeric_limits<long long>::max())))
            : value.get<long long>();
    if (result < min_value || result > max_value) fail(key, range);
    return result;
  }
  if (value.is_number_float()) {
    const double real = value.get<double>();
    if (std::isfinite(real) && real == std::floor(real) && real >= static_cast<double>(min_value) &&
        real <= static_cast<double>(max_value)) {
      return static_cast<long long>(real);
    }
  }
  fail(key, range);
}

std::optional<long long> JsonReader::optional_integer(const std::string& key, long long min_value,
                                                      long long max_value) const {
  if (!has(key)) return std::nullopt;
  return integer(key, min_value, max_value);
}

std::string JsonReader::string(const std::string& key) const {
  const Json& value = require(key);
  if (!value.is_string()) fail(key, "a string");
  return value.get<std::string>();
}

std::optional<std::string> JsonReader::optional_string(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return string(key);
}

bool JsonReader::boolean(const std::string& key) const {
  const Json& value = require(key);
  if (!value.is_boolean()) fail(key, "true or false");
  return value.get<bool>();
}

std::optional<bool> JsonReader::optional_boolean(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return boolean(key);
}

std::string JsonReader::choice(const std::string& key,
                               const std::vector<std::string>& choices) const {
  const std::string value = string(key);
  for (const auto& option : choices) {
    if (option == value) return value;
  }
  std::string expected = "one of";
  for (std::size_t i = 0; i < choices.size(); ++i) {
    expected += (i == 0 ? " \"" : ", \"") + choices[i] + "\"";
  }
  fail(key, expected);
}

std::optional<double> quantity_from_json(const Json& value, units::Dimension dimension) {
  if (value.is_number()) {
    const double number = value.get<double>();
    if (!std::isfinite(number)) return std::nullopt;
    return number;
  }
  if (value.is_string()) return units::parse(value.get<std::string>(), dimension);
  return std::nullopt;
}

double JsonReader::quantity(const std::string& key, units::Dimension dimension,
                            bool positive) const {
  const Json& value = require(key);
  const auto parsed = quantity_from_json(value, dimension);
  if (!parsed) fail(key, units::expected_form(dimension));
  if (positive && !(*parsed > 0.0)) fail(key, units::expected_form(dimension) + ", above zero");
  if (!positive && *parsed < 0.0) fail(key, units::expected_form(dimension) + ", zero or more");
  return *parsed;
}

std::optional<double> JsonReader::optional_quantity(const std::string& key,
                                                    units::Dimension dimension,
                                                    bool positive) const {
  if (!has(key)) return std::nullopt;
  return quantity(key, dimension, positive);
}

JsonReader JsonReader::object(const std::string& key) const {
  const Json& value = require(key);
  if (!value.is_object()) fail(key, "a JSON object");
  return JsonReader(value, file_, child_path(key));
}

std::vector<JsonReader> JsonReader::objects(const std::string& key) const {
  const Json& value = require(key);
  if (!value.is_array()) fail(key, "an array of objects");
  std::vector<JsonReader> readers;
  readers.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    readers.emplace_back(value[i], file_, fmt::format("{}[{}]", child_path(key), i));
  }
  return readers;
}

void JsonReader::require_only(const std::vector<std::string>& allowed) const {
  for (const auto& [key, value] : object_->items()) {
    bool known = false;
    for (const auto& name : allowed) known = known || name == key;
    if (known) continue;
    std::string nearest;
    std::size_t best = std::numeric_limits<std::size_t>::max();
    for (const auto& name : allowed) {
      // A key that is the start of an allowed one ("memory" for "memory_limit") is close too.
      const bool prefix = key.size() >= 3 && name.rfind(key, 0) == 0;
      const std::size_t distance = prefix ? 1 : edit_distance(key, name);
      if (distance < best) {
        best = distance;
        nearest = name;
      }
    }
    std::string expected = "a known key";
    if (!nearest.empty() && best <= std::max<std::size_t>(2, key.size() / 3)) {
      expected += " (did you mean \"" + nearest + "\"?)";
    } else {
      expected += " (one of:";
      for (const auto& name : allowed) expected += " " + name;
      expected += ")";
    }
    throw InputError(file_, child_path(key), "unknown key \"" + key + "\"", expected);
  }
}

}  // namespace osdp
