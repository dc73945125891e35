// The plain CSV the measured tables use: comma-separated cells, no quoting, one row a line.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace osdp {

// The cells of one line (a trailing '\r' dropped; a trailing comma is one more, empty cell).
std::vector<std::string> split_csv_line(std::string line);
// `text` without a leading UTF-8 byte-order mark (spreadsheets write one before the header).
std::string without_byte_order_mark(const std::string& text);
// Where a header first differs from the expected columns, in words: "column 3 is \"micro-batch\"
// where \"micro batch\" is expected", "column 12, \"extra\", is one too many", "column 11,
// \"iteration time (ms)\", is missing" ("" when they are equal).
std::string header_difference(const std::vector<std::string>& got,
                              const std::vector<std::string>& expected);
// "row at line 7, column \"GPU\"" (or "row at line 7" without a column), for InputErrors.
std::string csv_location(int line, const std::string& column);

// `text` as a positive finite number at most `most`; nothing when it is not one.
std::optional<double> positive_number(const std::string& text, double most);
// `text` as a whole number written as one (not 2.5, 0x10 or " 512") from 1 to `most`.
std::optional<long long> whole_number(const std::string& text, long long most);

// One data row of a table by column name (the columns as its header names them), and the
// InputError a bad cell gets: the file, the line, the column, the cell and what was expected.
struct CsvRow {
  const std::string& file;
  int line;
  const std::vector<std::string>& columns;
  const std::vector<std::string>& cells;

  const std::string& cell(const std::string& column) const;
  [[noreturn]] void fail(const std::string& column, const std::string& expected) const;
};

}  // namespace osdp
