#include "cli/report_page.hpp"

#include <string_view>

namespace osdp::cli {

// Generated from cli/report/page.html and page.js (cli/report/report_assets.cpp.in).
extern const std::string_view report_page_html;
extern const std::string_view report_page_script;

namespace {

std::string replace_once(std::string text, std::string_view marker, std::string_view with) {
  const std::size_t at = text.find(marker);
  if (at != std::string::npos) text.replace(at, marker.size(), with);
  return text;
}

// JSON inside <script>: "</" would end the element early, so it is written "<\/" (the same
// string in JSON). Invalid UTF-8 in names is replaced rather than thrown.
std::string script_safe_json(const Json& data) {
  const std::string json = data.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string safe;
  safe.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') {
      safe += "<\\/";
      ++i;
    } else {
      safe += json[i];
    }
  }
  return safe;
}

}  // namespace

std::string render_report_page(const Json& data) {
  std::string page(report_page_html);
  page = replace_once(std::move(page), "/*@OSDP_REPORT_SCRIPT@*/", report_page_script);
  return replace_once(std::move(page), "/*@OSDP_REPORT_DATA@*/", script_safe_json(data));
}

}  // namespace osdp::cli
