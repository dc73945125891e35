#include "model/csv.hpp"

#include <fmt/format.h>

#include <sstream>

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

std::string csv_location(int line, const std::string& column) {
  return column.empty() ? fmt::format("row at line {}", line)
                        : fmt::format("row at line {}, column \"{}\"", line, column);
}

}  // namespace osdp
