#include "model/input_error.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

namespace osdp {
namespace {
// No part of a message grows with the input: a 64 MiB key or a 4,000-byte file name is cut.
std::string bounded(const std::string& text, std::size_t max_chars) {
  if (text.size() <= max_chars) return text;
  return text.substr(0, max_chars - 40) + "... (" + std::to_string(text.size()) + " bytes)";
}

// Control characters shown as \u001b: a value from a CSV cell or the command line reaches the
// terminal otherwise raw (an escape sequence can retitle or recolour it). `keep_lines` leaves
// the line breaks of a message that has several.
std::string escaped(const std::string& text, bool keep_lines = false) {
  std::string shown;
  shown.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 || byte == 0x7f) && !(keep_lines && c == '\n')) {
      static const char* const hex = "0123456789abcdef";
      shown += "\\u00";
      shown += hex[byte >> 4];
      shown += hex[byte & 0xf];
    } else {
      shown += c;
    }
  }
  return shown;
}

std::string describe(const std::string& file, const std::string& json_path,
                     const std::string& value, const std::string& expected) {
  std::string message = file.empty() ? std::string("input") : escaped(bounded(file, 300));
  if (!json_path.empty()) message += ": " + escaped(bounded(json_path, 300));
  if (!value.empty()) message += ": got " + escaped(bounded(value, 200));
  message += ": expected " + escaped(bounded(expected, 1000), true);
  return message;
}
}  // namespace

InputError::InputError(std::string file, std::string json_path, std::string value,
                       std::string expected)
    : std::runtime_error(describe(file, json_path, value, expected)),
      file_(std::move(file)),
      json_path_(std::move(json_path)),
      value_(std::move(value)),
      expected_(std::move(expected)) {}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const std::size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitution});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearest_name(const std::string& given, const std::vector<std::string>& names) {
  // A very long value is near nothing; its distance would cost its size x each name's size.
  if (given.empty() || given.size() > 64) return "";
  const auto lower = [](std::string text) {
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
  };
  const std::string key = lower(given);
  std::string nearest;
  std::size_t best = std::max<std::size_t>(2, key.size() / 3) + 1;
  for (const std::string& name : names) {
    const std::size_t distance = edit_distance(key, lower(name));
    if (distance < best) {
      best = distance;
      nearest = name;
    }
  }
  return nearest;
}

}  // namespace osdp
