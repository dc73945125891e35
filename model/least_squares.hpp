// Non-negative linear least squares, for the fits of measured laws (`osdp fit`): a handful of
// constants, each a rate or a time that cannot be negative; and the error every fit reports.
#pragma once

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

}  // namespace osdp
