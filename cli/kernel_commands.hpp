// `osdp fit` and `osdp predict` on a kernel table (model/kernel_table.hpp: GEMM or attention
// timings by shape): fit prints the laws with their fit-set and cross-validated errors and writes
// the scenario's cluster with them; predict times every row with the scenario's cluster's laws.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/kernel_table.hpp"
#include "model/scenario.hpp"

namespace osdp::cli {

// The table, when --table names a kernel table (by its header); InputError when it names one
// beside other tables.
std::optional<KernelTable> kernel_table_in(const std::vector<std::string>& table_paths);

int run_kernel_fit(const Scenario& scenario, const KernelTable& table, const std::string& out_path,
                   bool json);
int run_kernel_predict(const Scenario& scenario, const KernelTable& table, bool json);

}  // namespace osdp::cli
