// The plain CSV the measured tables use: comma-separated cells, no quoting, one row a line.
#pragma once

#include <string>
#include <vector>

namespace osdp {

// The cells of one line (a trailing '\r' dropped; a trailing comma is one more, empty cell).
std::vector<std::string> split_csv_line(std::string line);
// "row at line 7, column \"GPU\"" (or "row at line 7" without a column), for InputErrors.
std::string csv_location(int line, const std::string& column);

}  // namespace osdp
