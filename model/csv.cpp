#include "model/csv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "model/input_error.hpp"

namespace osdp {

std::vector<std::string> split_csv_line(std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();  // files written on Windows
  std::vector<std::string> cells;
  std::stringstream stream(line);
  std::string cell;
  while (std::getline(stream, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

std::string without_byte_order_mark(const std::string& text) {
  return text.rfind("\xEF\xBB\xBF", 0) == 0 ? text.substr(3) : text;
}

namespace {

// A cell in quotes with its invisible characters shown ("time\\r"), so that a difference the
// eye cannot see is named.
std::string visible(const std::string& cell) {
  std::string shown = "\"";
  for (unsigned char c : cell) {
    if (c == '\r') {
      shown += "\\r";
    } else if (c == '\t') {
      shown += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      shown += fmt::format("\\x{:02x}", c);
    } else {
      shown += static_cast<char>(c);
    }
  }
  return shown + "\"";
}

}  // namespace

std::string header_difference(const std::vector<std::string>& got,
                              const std::vector<std::string>& expected) {
  for (std::size_t i = 0; i < std::max(got.size(), expected.size()); ++i) {
    if (i >= got.size()) {
      return fmt::format("column {}, {}, is missing", i + 1, visible(expected[i]));
    }
    if (i >= expected.size()) {
      return fmt::format("column {}, {}, is one too many", i + 1, visible(got[i]));
    }
    if (got[i] != expected[i]) {
      return fmt::format("column {} is {} where {} is expected", i + 1, visible(got[i]),
                         visible(expected[i]));
    }
  }
  return "";
}

std::string csv_location(int line, const std::string& column) {
  return column.empty() ? fmt::format("row at line {}", line)
                        : fmt::format("row at line {}, column \"{}\"", line, column);
}

std::optional<double> positive_number(const std::string& text, double most) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size() || !std::isfinite(value) || value <= 0 || value > most) {
    return std::nullopt;
  }
  return value;
}

std::optional<long long> whole_number(const std::string& text, long long most) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || ptr != end || value < 1 || value > most) return std::nullopt;
  return value;
}

const std::string& CsvRow::cell(const std::string& column) const {
  return cells[std::find(columns.begin(), columns.end(), column) - columns.begin()];
}

void CsvRow::fail(const std::string& column, const std::string& expected) const {
  throw InputError(file, csv_location(line, column), fmt::format("\"{}\"", cell(column)), expected);
}

}  // namespace osdp
