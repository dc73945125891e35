// Output files are written to a temporary name beside the target and renamed into place, so an
// interrupted run never leaves a half-written file.
#pragma once

#include <string>

namespace osdp {

// Writes `contents` to `path` atomically; creates parent directories. Throws std::runtime_error
// with the path on failure.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace osdp
