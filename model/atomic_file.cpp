#include "model/atomic_file.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace osdp {

void write_file_atomically(const std::string& path, const std::string& contents) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code error;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), error);
  const fs::path temporary =
      target.parent_path() / (".tmp." + target.filename().string() + "." + std::to_string(getpid()));
  {
    std::ofstream stream(temporary, std::ios::binary | std::ios::trunc);
    stream << contents;
    stream.flush();
    if (!stream) {
      fs::remove(temporary, error);
      throw std::runtime_error("cannot write " + path);
    }
  }
  fs::rename(temporary, target, error);
  if (error) {
    fs::remove(temporary, error);
    throw std::runtime_error("cannot write " + path + ": " + error.message());
  }
}

}  // namespace osdp
