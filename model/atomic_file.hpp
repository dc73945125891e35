// Output files are written to a temporary name beside the target and renamed into place, so an
// interrupted run never leaves a half-written file. A special file (a device such as /dev/null,
// a FIFO) is written into instead: renaming over it would replace the device node itself.
#pragma once

#include <optional>
#include <string>

namespace osdp {

// Writes `contents` to `path` atomically; creates parent directories. Throws std::runtime_error
// with the path on failure.
void write_file_atomically(const std::string& path, const std::string& contents);

// Why `path` cannot take an output file (a directory, a socket, a parent that is a file or not
// writable), or nullopt when it can. Commands check their outputs before running.
std::optional<std::string> unusable_output(const std::string& path);

}  // namespace osdp
