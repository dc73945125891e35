// Non-negative linear least squares, for the fits of measured laws (`osdp fit`): a handful of
// constants, each a rate or a time that cannot be negative.
#pragma once

#include <vector>

namespace osdp {

// min ||A x - b|| subject to x >= 0 (Lawson and Hanson's active-set method). A is row-major,
// rows x columns.
std::vector<double> non_negative_least_squares(const std::vector<std::vector<double>>& a,
                                               const std::vector<double>& b);

}  // namespace osdp
