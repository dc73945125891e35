// One case of the bad-input table (tests/inputs/bad_inputs.json) as the text of a scenario file.
// A case is the base scenario edited by JSON pointer ("set", "remove"), or raw text ("text"),
// or the base with raw JSON spliced in at a pointer ("splice": {"at", "raw"}: duplicate keys),
// with a value nested "depth" levels deep ("nest": {"at", "open", "close", "depth"}), or with
// bytes after the document ("append"). Cases with "file", "command", "args" or "exit" need the
// `osdp` process (special files, flags, exit codes other than 2) and run in tests/cli only.
#pragma once

#include <string>

#include "model/json_reader.hpp"

namespace osdp::test {

inline bool cli_only_case(const Json& bad) {
  return bad.contains("file") || bad.contains("command") || bad.contains("args") ||
         bad.contains("exit");
}

namespace detail {
// The base with the value at `pointer` replaced by `raw` JSON text.
inline std::string splice(Json document, const std::string& pointer, const std::string& raw) {
  const std::string marker = "@@splice@@";
  document[Json::json_pointer(pointer)] = marker;
  std::string text = document.dump();
  const std::size_t at = text.find("\"" + marker + "\"");
  return text.replace(at, marker.size() + 2, raw);
}

inline std::string repeated(const std::string& part, int times) {
  std::string text;
  text.reserve(part.size() * static_cast<std::size_t>(times));
  for (int i = 0; i < times; ++i) text += part;
  return text;
}
}  // namespace detail

inline std::string bad_case_text(const Json& base, const Json& bad) {
  if (bad.contains("text")) return bad["text"].get<std::string>();
  Json document = base;
  if (bad.contains("set")) {
    for (const auto& [pointer, value] : bad["set"].items()) {
      const Json::json_pointer at(pointer);
      if (value.is_null()) {
        document.at(at.parent_pointer()).erase(at.back());
      } else {
        document[at] = value;
      }
    }
  }
  if (bad.contains("remove")) {
    for (const auto& pointer : bad["remove"]) {
      const Json::json_pointer at(pointer.get<std::string>());
      document.at(at.parent_pointer()).erase(at.back());
    }
  }
  std::string text = document.dump();
  if (bad.contains("splice")) {
    const Json& splice = bad["splice"];
    text = detail::splice(document, splice["at"], splice["raw"]);
  }
  if (bad.contains("nest")) {
    const Json& nest = bad["nest"];
    const int depth = nest["depth"].get<int>();
    text = detail::splice(document, nest["at"],
                          detail::repeated(nest["open"], depth) + nest.value("inner", "0") +
                              detail::repeated(nest["close"], depth));
  }
  if (bad.contains("append")) text += bad["append"].get<std::string>();
  return text;
}

}  // namespace osdp::test
