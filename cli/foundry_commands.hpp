// `osdp predict` and `osdp fit` on llm-foundry's benchmark table (model/foundry_table.hpp), for
// scenarios whose "measured_runs" describe llm-foundry runs (model/foundry_runs.hpp).
#pragma once

#include <string>
#include <vector>

#include "model/scenario.hpp"

namespace osdp::cli {

int run_foundry_predict(const Scenario& scenario, const std::vector<std::string>& table_paths,
                        bool json);
int run_foundry_fit(const Scenario& scenario, const std::vector<std::string>& table_paths,
                    const std::string& out_path, bool json);

}  // namespace osdp::cli
