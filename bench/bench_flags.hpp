// A benchmark program's own flags, taken off the command line before Google Benchmark reads the
// rest (it refuses flags it does not know).
#pragma once

#include <string_view>

namespace osdp::bench {

// Whether `flag` was given; every occurrence is removed from argv (argc shrinks with it).
inline bool take_flag(int& argc, char** argv, std::string_view flag) {
  bool given = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (flag == argv[i]) {
      given = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return given;
}

}  // namespace osdp::bench
