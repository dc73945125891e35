// The HTML page of `osdp report`: the report's figures (JSON) inlined into one self-contained
// page (cli/report/page.html and page.js, compiled into osdp) that draws them with no network.
#pragma once

#include <string>

#include "model/json_reader.hpp"

namespace osdp::cli {

std::string render_report_page(const Json& data);

}  // namespace osdp::cli
