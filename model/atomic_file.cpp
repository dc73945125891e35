#include "model/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "model/input_error.hpp"

namespace osdp {
namespace {

namespace fs = std::filesystem;

// An output that could not be written is the user's path (a full disk, a device that refuses):
// exit 2 with the path and the reason, never an internal error.
[[noreturn]] void fail_write(const std::string& path, const std::string& reason) {
  throw InputError(path, "", "a write that failed (" + reason + ")",
                   "an output path osdp can write (space left, a writable file or directory)");
}

// Writes into an existing character device or FIFO. A FIFO without a reader is refused rather
// than waited on.
void write_into_special(const std::string& path, const std::string& contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    fail_write(path, errno == ENXIO ? std::string("a FIFO with no reader")
                                    : std::string(std::strerror(errno)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::size_t written = 0;
  while (written < contents.size()) {
    const ssize_t done = ::write(fd, contents.data() + written, contents.size() - written);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) {
      const std::string reason = std::strerror(errno);
      ::close(fd);
      fail_write(path, reason);
    }
    written += static_cast<std::size_t>(done);
  }
  ::close(fd);
}

bool writes_into(fs::file_type type) {
  return type == fs::file_type::character || type == fs::file_type::fifo;
}

std::string file_type_name(fs::file_type type) {
  switch (type) {
    case fs::file_type::regular:
      return "a file";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "another kind of file";
  }
}

// "Not a directory" for out/x when out is a file: names the part of the path that is not a
// directory and what it is (--out /dev/null: a character device).
std::optional<std::string> not_a_directory_on_the_way(const fs::path& target) {
  for (fs::path part = target.parent_path(); !part.empty() && part != part.parent_path();
       part = part.parent_path()) {
    std::error_code error;
    const fs::file_status status = fs::status(part, error);
    if (error || status.type() == fs::file_type::not_found) continue;
    if (status.type() == fs::file_type::directory) return std::nullopt;
    return "a path inside " + part.string() + ", which is " + file_type_name(status.type()) +
           ", not a directory";
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> unusable_output(const std::string& path) {
  std::error_code error;
  const fs::path target(path);
  const fs::file_status status = fs::status(target, error);
  if (status.type() == fs::file_type::directory) return "a directory";
  // "out/" names a directory even before it exists (creating it would leave it behind).
  if (!path.empty() && path.back() == '/') return "a directory (the path ends with /)";
  if (status.type() == fs::file_type::socket || status.type() == fs::file_type::block) {
    return "a special file osdp does not write into";
  }
  if (writes_into(status.type())) return std::nullopt;
  if (error && error != std::errc::no_such_file_or_directory) {
    if (error == std::errc::not_a_directory) {
      if (auto where = not_a_directory_on_the_way(target)) return where;
    }
    return "a path osdp cannot use: " + error.message();
  }
  // The nearest existing ancestor must be a writable directory (the rest is created).
  fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  while (!fs::exists(parent, error)) {
    if (!parent.has_parent_path() || parent == parent.parent_path()) {
      parent = ".";
      break;
    }
    parent = parent.parent_path();
  }
  if (!fs::is_directory(parent, error))
    return "inside " + parent.string() + ", which is not a directory";
  if (::access(parent.c_str(), W_OK) != 0)
    return "inside " + parent.string() + ", which is not writable";
  // access() says yes to root everywhere, /proc and /sys included: create a file to be sure.
  const fs::path probe = parent / (".osdp-probe." + std::to_string(getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return "inside " + parent.string() + ", where osdp cannot create a file (" +
           std::strerror(errno) + ")";
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return std::nullopt;
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  const fs::path target(path);
  std::error_code error;
  if (writes_into(fs::status(target, error).type())) {
    write_into_special(path, contents);
    return;
  }
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), error);
  const fs::path temporary = target.parent_path() / (".tmp." + target.filename().string() + "." +
                                                     std::to_string(getpid()));
  {
    errno = 0;
    std::ofstream stream(temporary, std::ios::binary | std::ios::trunc);
    stream << contents;
    stream.flush();
    if (!stream) {
      const std::string reason = errno != 0 ? std::strerror(errno) : "the stream failed";
      fs::remove(temporary, error);
      fail_write(path, reason);
    }
  }
  fs::rename(temporary, target, error);
  if (error) {
    const std::string reason = error.message();
    fs::remove(temporary, error);
    fail_write(path, reason);
  }
}

void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files) {
  // Devices and FIFOs first: they cannot be renamed into place, so a failure there must come
  // before any regular file is written.
  std::error_code error;
  for (const auto& [path, contents] : files) {
    if (writes_into(fs::status(path, error).type())) write_file_atomically(path, contents);
  }
  for (const auto& [path, contents] : files) {
    if (!writes_into(fs::status(path, error).type())) write_file_atomically(path, contents);
  }
}

std::optional<std::string> input_named_by(const std::string& output,
                                          const std::vector<std::string>& inputs) {
  if (output.empty()) return std::nullopt;
  for (const std::string& input : inputs) {
    std::error_code error;
    if (!input.empty() && fs::equivalent(output, input, error) && !error) return input;
  }
  return std::nullopt;
}

}  // namespace osdp
