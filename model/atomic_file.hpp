// Output files are written to a temporary name beside the target and renamed into place, so an
// interrupted run never leaves a half-written file. A special file (a device such as /dev/null,
// a FIFO) is written into instead: renaming over it would replace the device node itself.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace osdp {

// Writes `contents` to `path` atomically; creates parent directories. Throws InputError with the
// path and the reason on failure (exit 2).
void write_file_atomically(const std::string& path, const std::string& contents);
// Several outputs of one command: the special files (devices, FIFOs) first, so that a failed
// write into one leaves no regular file written.
void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files);

// Why `path` cannot take an output file (a directory, a socket, a parent that is a file or not
// writable), or nullopt when it can. Commands check their outputs before running.
std::optional<std::string> unusable_output(const std::string& path);

// The first of `inputs` that `output` names (the same file, by whatever path), or nullopt:
// writing an output there would destroy what the command reads.
std::optional<std::string> input_named_by(const std::string& output,
                                          const std::vector<std::string>& inputs);

}  // namespace osdp
