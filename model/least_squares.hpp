// Non-negative linear least squares, for the fits of measured laws (`osdp fit`): a handful of
// constants, each a rate or a time that cannot be negative; and the error every fit reports.
#pragma once

#include <string>
#include <vector>

namespace osdp {

// min ||A x - b|| subject to x >= 0 (Lawson and Hanson's active-set method). A is row-major,
// rows x columns.
std::vector<double> non_negative_least_squares(const std::vector<std::vector<double>>& a,
                                               const std::vector<double>& b);

// Mean absolute percent error (MAPE) of `predicted` against `measured` (same length, measured
// above zero); the largest one in `max_percent` when given. 0 for no rows.
double mean_abs_percent_error(const std::vector<double>& predicted,
                              const std::vector<double>& measured, double* max_percent = nullptr);

// Above this MAPE on its own rows a fit explains nothing about them: the table's times are
// in another unit than its header says (seconds in a column of milliseconds), or its rows
// are not one kind of run. osdp writes no cluster from such a fit.
inline constexpr double most_usable_fit_mape_percent = 100.0;

// Throws an InputError naming the table's `file` and `column` when `fit_mape_percent` is above
// most_usable_fit_mape_percent (or not a number).
void require_usable_fit(const std::string& file, const std::string& column,
                        double fit_mape_percent);

}  // namespace osdp
