#include "model/json_reader.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <unordered_set>

namespace osdp {

namespace {

// The parser callback: bounds the nesting depth (printing or walking a deeper value would
// overflow the stack) and refuses a key given twice in one object (the last would silently win).
// It tracks the JSON path of the value being parsed for the message.
class StructureGuard {
 public:
  explicit StructureGuard(const std::string& file) : file_(file) {}

  bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        open(event == Json::parse_event_t::array_start);
        break;
      case Json::parse_event_t::key:
        add_key(parsed.get_ref<const std::string&>());
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        frames_.pop_back();
        next_element();
        break;
      case Json::parse_event_t::value:
        next_element();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool array = false;
    std::size_t index = 0;  // of the element being parsed, in an array
    std::string key;        // being parsed, in an object
    std::unordered_set<std::string> keys;
  };

  void open(bool array) {
    if (static_cast<int>(frames_.size()) >= max_json_depth) {
      throw InputError(
          file_, path(), fmt::format("a value nested deeper than {} levels", max_json_depth),
          fmt::format("at most {} levels of nested arrays and objects", max_json_depth));
    }
    frames_.push_back(Frame{array, 0, {}, {}});
  }

  void add_key(const std::string& key) {
    Frame& frame = frames_.back();
    frame.key = key;
    if (!frame.keys.insert(key).second) {
      throw InputError(file_, path(), "a second \"" + key + "\" in one object",
                       "each key once per object (the second would silently replace the first)");
    }
  }

  void next_element() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }

  std::string path() const {
    std::string text = "$";
    for (const Frame& frame : frames_) {
      text += frame.array ? fmt::format("[{}]", frame.index) : "." + frame.key;
    }
    return text;
  }

  const std::string& file_;
  std::vector<Frame> frames_;
};

// Closes a file descriptor on every path out.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

[[noreturn]] void too_large(const std::string& path, const std::string& size) {
  throw InputError(path, "", "a file of " + size,
                   fmt::format("a JSON file of at most {} MiB", max_input_bytes >> 20));
}

// "line 3, column 1" of the byte the parser stopped at (1-based, as nlohmann counts it).
std::string line_and_column(const std::string& text, std::size_t byte) {
  const std::size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  std::size_t line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return fmt::format("line {}, column {}", line, end - line_start + 1);
}

// What the parser says after its "[json.exception...] parse error at line L, column C: ".
std::string parser_reason(const std::string& what) {
  const std::size_t colon = what.find(": ");
  std::string reason = colon == std::string::npos ? what : what.substr(colon + 2);
  if (reason.size() > 160) reason = reason.substr(0, 157) + "...";
  return reason;
}

// Common slips of hand-written JSON, named.
std::string hint_for(const std::string& text, std::size_t byte) {
  const std::size_t at = std::min(byte > 0 ? byte - 1 : 0, text.size());
  std::size_t before = at;
  while (before > 0 && std::isspace(static_cast<unsigned char>(text[before - 1]))) --before;
  if (at < text.size() && (text[at] == '}' || text[at] == ']') && before > 0 &&
      text[before - 1] == ',') {
    return " (a trailing comma before it: JSON allows none)";
  }
  if (at < text.size() && (text[at] == '/' || text[at] == '#')) {
    return " (a comment: JSON has none)";
  }
  return "";
}

}  // namespace

Json parse_json_text(const std::string& text, const std::string& file) {
  if (std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); })) {
    throw InputError(file, "", "an empty file", "one JSON document");
  }
  if (text.size() > max_input_bytes) too_large(file, fmt::format("{} bytes", text.size()));
  // The parser stops at a NUL byte and would ignore whatever follows it.
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos) {
    throw InputError(file, "", fmt::format("a NUL byte at byte {}", nul),
                     "JSON text: no NUL bytes, nothing after the document");
  }
  StructureGuard guard(file);
  const Json::parser_callback_t callback = [&guard](int depth, Json::parse_event_t event,
                                                    Json& parsed) {
    return guard(depth, event, parsed);
  };
  try {
    return Json::parse(text, callback);
  } catch (const Json::parse_error& error) {
    throw InputError(file, "",
                     fmt::format("text that does not parse at {} (byte {}): {}{}",
                                 line_and_column(text, error.byte), error.byte,
                                 parser_reason(error.what()), hint_for(text, error.byte)),
                     "valid JSON (one document, nothing after it)");
  } catch (const Json::exception& error) {
    // e.g. a number too large for a double ("9e511").
    std::string what = error.what();
    // "[json.exception.out_of_range.406] number overflow ..." -> "number overflow ...".
    if (const std::size_t end = what.find("] ");
        what.rfind("[json.exception", 0) == 0 && end != std::string::npos) {
      what = what.substr(end + 2);
    }
    if (what.size() > 120) what = what.substr(0, 117) + "...";
    throw InputError(file, "", "JSON the parser refuses (" + what + ")",
                     "valid JSON with finite numbers");
  }
}

std::string read_input_file(const std::string& path, const std::string& format) {
  // O_NONBLOCK: opening a FIFO without a writer must not block; it is refused below.
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    throw InputError(path, "",
                     fmt::format("a path that cannot be opened ({})", std::strerror(errno)),
                     fmt::format("a readable {} file", format));
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    throw InputError(path, "", file_kind(info.st_mode), fmt::format("a regular {} file", format));
  }
  if (static_cast<std::uint64_t>(info.st_size) > max_input_bytes) {
    too_large(path, units::format_bytes(static_cast<double>(info.st_size)));
  }
  // Bounded even if the file grows while it is read.
  std::string text(static_cast<std::size_t>(info.st_size) + 1, '\0');
  std::size_t filled = 0;
  while (true) {
    if (filled == text.size()) {
      if (text.size() > max_input_bytes) too_large(path, "more than the limit");
      text.resize(std::min(text.size() * 2 + 4096, max_input_bytes + 1));
    }
    const ssize_t got = ::read(fd.get(), text.data() + filled, text.size() - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw InputError(path, "",
                       fmt::format("a file that cannot be read ({})", std::strerror(errno)),
                       "a readable JSON file");
    }
    if (got == 0) break;
    filled += static_cast<std::size_t>(got);
  }
  text.resize(filled);
  return text;
}

Json read_json_file(const std::string& path) {
  return parse_json_text(read_input_file(path), path);
}

std::string render_value(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

JsonReader::JsonReader(const Json& object, std::string file, std::string path)
    : object_(&object), file_(std::move(file)), path_(std::move(path)) {
  if (!object.is_object()) {
    throw InputError(file_, path_, render_value(object), "a JSON object");
  }
}

bool JsonReader::has(const std::string& key) const {
  return object_->contains(key) && !(*object_)[key].is_null();
}

const Json& JsonReader::raw(const std::string& key) const { return require(key); }

std::string JsonReader::child_path(const std::string& key) const { return path_ + "." + key; }

// What a message shows for `key` of `object`: its value, "null" when written as null (read as not
// given, but "got nothing" pointed the reader away from a key that is there), else "nothing".
namespace {
std::string shown_value(const Json& object, const std::string& key) {
  if (!object.contains(key)) return "nothing";
  return render_value(object[key]);
}
}  // namespace

const Json& JsonReader::require(const std::string& key) const {
  if (!has(key)) {
    throw InputError(file_, child_path(key), shown_value(*object_, key),
                     object_->contains(key) ? "a value, not null" : "this key to be present");
  }
  return (*object_)[key];
}

void JsonReader::fail(const std::string& key, const std::string& expected) const {
  const std::string value = shown_value(*object_, key);
  throw InputError(file_, key.empty() ? path_ : child_path(key), value, expected);
}

void JsonReader::fail_value(const std::string& key, const std::string& value,
                            const std::string& expected) const {
  throw InputError(file_, key.empty() ? path_ : child_path(key), value, expected);
}

double JsonReader::number(const std::string& key) const {
  const Json& value = require(key);
  if (!value.is_number()) fail(key, "a number");
  const double result = value.get<double>();
  if (!std::isfinite(result)) fail(key, "a finite number");
  return result;
}

std::optional<double> JsonReader::optional_number(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return number(key);
}

double JsonReader::positive_number(const std::string& key) const {
  const double value = number(key);
  if (!(value > 0.0)) fail(key, "a number greater than zero");
  return value;
}

double JsonReader::non_negative_number(const std::string& key) const {
  const double value = number(key);
  if (value < 0.0) fail(key, "a number that is zero or more");
  return value;
}

std::optional<double> JsonReader::optional_non_negative_number(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return non_negative_number(key);
}

long long JsonReader::integer(const std::string& key, long long min_value,
                              long long max_value) const {
  const Json& value = require(key);
  const std::string range = fmt::format("an integer from {} to {}", min_value, max_value);
  if (value.is_number_integer()) {
    const long long result =
        value.is_number_unsigned()
            ? static_cast<long long>(std::min<unsigned long long>(
                  value.get<unsigned long long>(),
                  static_cast<unsigned long long>(std::numeric_limits<long long>::max())))
            : value.get<long long>();
    if (result < min_value || result > max_value) fail(key, range);
    return result;
  }
  if (value.is_number_float()) {
    const double real = value.get<double>();
    if (std::isfinite(real) && real == std::floor(real) && real >= static_cast<double>(min_value) &&
        real <= static_cast<double>(max_value)) {
      return static_cast<long long>(real);
    }
  }
  fail(key, range);
}

std::optional<long long> JsonReader::optional_integer(const std::string& key, long long min_value,
                                                      long long max_value) const {
  if (!has(key)) return std::nullopt;
  return integer(key, min_value, max_value);
}

std::string JsonReader::string(const std::string& key) const {
  const Json& value = require(key);
  if (!value.is_string()) fail(key, "a string");
  return value.get<std::string>();
}

std::optional<std::string> JsonReader::optional_string(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return string(key);
}

std::string JsonReader::name(const std::string& key) const {
  std::string text = string(key);
  const bool control = std::any_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
  });
  // Shown escaped, as JSON writes it, so that the message itself prints nothing raw.
  if (control) fail_value(key, Json(text).dump(), "a name without control characters");
  return text;
}

std::optional<std::string> JsonReader::optional_name(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return name(key);
}

bool JsonReader::boolean(const std::string& key) const {
  const Json& value = require(key);
  if (!value.is_boolean()) fail(key, "true or false");
  return value.get<bool>();
}

std::optional<bool> JsonReader::optional_boolean(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return boolean(key);
}

std::string JsonReader::choice(const std::string& key,
                               const std::vector<std::string>& choices) const {
  const std::string value = string(key);
  for (const auto& option : choices) {
    if (option == value) return value;
  }
  std::string expected = "one of";
  for (std::size_t i = 0; i < choices.size(); ++i) {
    expected += (i == 0 ? " \"" : ", \"") + choices[i] + "\"";
  }
  fail(key, expected);
}

std::optional<double> quantity_from_json(const Json& value, units::Dimension dimension) {
  if (value.is_number()) {
    const double number = value.get<double>();
    if (!std::isfinite(number)) return std::nullopt;
    return number;
  }
  if (value.is_string()) return units::parse(value.get<std::string>(), dimension);
  return std::nullopt;
}

double JsonReader::quantity(const std::string& key, units::Dimension dimension,
                            bool positive) const {
  const Json& value = require(key);
  const auto parsed = quantity_from_json(value, dimension);
  if (!parsed) fail(key, units::expected_form(dimension));
  if (positive && !(*parsed > 0.0)) fail(key, units::expected_form(dimension) + ", above zero");
  if (!positive && *parsed < 0.0) fail(key, units::expected_form(dimension) + ", zero or more");
  return *parsed;
}

std::optional<double> JsonReader::optional_quantity(const std::string& key,
                                                    units::Dimension dimension,
                                                    bool positive) const {
  if (!has(key)) return std::nullopt;
  return quantity(key, dimension, positive);
}

std::string describe_range(const Range& range, std::optional<units::Dimension> dimension) {
  auto show = [&](double value) -> std::string {
    if (!dimension) return fmt::format("{:g}", value);
    switch (*dimension) {
      case units::Dimension::bytes:
        return value >= limits::kTiB ? fmt::format("{:g} TiB", value / limits::kTiB)
                                     : units::format_bytes(value);
      case units::Dimension::seconds:
        // Below a tenth of a microsecond format_seconds would print "0.0 us".
        return value == 0.0   ? std::string("0 s")
               : value < 1e-7 ? fmt::format("{:g} s", value)
                              : units::format_seconds(value);
      case units::Dimension::bytes_per_second:
        return fmt::format("{:g} B/s", value);
      case units::Dimension::flops_per_second:
        return fmt::format("{:g} FLOP/s", value);
    }
    return fmt::format("{:g}", value);
  };
  return fmt::format("from {} to {} (the plausible range of {})", show(range.min), show(range.max),
                     range.what);
}

double JsonReader::quantity(const std::string& key, units::Dimension dimension,
                            const Range& range) const {
  const double value = quantity(key, dimension, range.min > 0.0);
  if (value < range.min || value > range.max) {
    fail(key, units::expected_form(dimension) + ", " + describe_range(range, dimension));
  }
  return value;
}

std::optional<double> JsonReader::optional_quantity(const std::string& key,
                                                    units::Dimension dimension,
                                                    const Range& range) const {
  if (!has(key)) return std::nullopt;
  return quantity(key, dimension, range);
}

double JsonReader::number(const std::string& key, const Range& range) const {
  const double value = number(key);
  if (value < range.min || value > range.max) {
    fail(key, "a number " + describe_range(range, std::nullopt));
  }
  return value;
}

std::optional<double> JsonReader::optional_number(const std::string& key,
                                                  const Range& range) const {
  if (!has(key)) return std::nullopt;
  return number(key, range);
}

JsonReader JsonReader::object(const std::string& key) const {
  const Json& value = require(key);
  if (!value.is_object()) fail(key, "a JSON object");
  return JsonReader(value, file_, child_path(key));
}

std::vector<JsonReader> JsonReader::objects(const std::string& key) const {
  const Json& value = require(key);
  if (!value.is_array()) fail(key, "an array of objects");
  std::vector<JsonReader> readers;
  readers.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    readers.emplace_back(value[i], file_, fmt::format("{}[{}]", child_path(key), i));
  }
  return readers;
}

void JsonReader::require_only(const std::vector<std::string>& allowed) const {
  for (const auto& [key, value] : object_->items()) {
    bool known = false;
    for (const auto& name : allowed) known = known || name == key;
    if (known) continue;
    std::string nearest;
    std::size_t best = std::numeric_limits<std::size_t>::max();
    for (const auto& name : allowed) {
      // A key that is the start of an allowed one ("memory" for "memory_limit") is close too.
      const bool prefix = key.size() >= 3 && name.rfind(key, 0) == 0;
      // A very long key is near nothing; its distance would cost key size x name size.
      const std::size_t distance = prefix            ? 1
                                   : key.size() > 64 ? std::numeric_limits<std::size_t>::max()
                                                     : edit_distance(key, name);
      if (distance < best) {
        best = distance;
        nearest = name;
      }
    }
    std::string expected = "a known key";
    if (!nearest.empty() && best <= std::max<std::size_t>(2, key.size() / 3)) {
      expected += " (did you mean \"" + nearest + "\"?)";
    } else {
      expected += " (one of:";
      for (const auto& name : allowed) expected += " " + name;
      expected += ")";
    }
    throw InputError(file_, child_path(key), "unknown key \"" + key + "\"", expected);
  }
}

}  // namespace osdp
