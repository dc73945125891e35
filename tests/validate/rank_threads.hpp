// Test helper: runs `body(communicator)` on `world` ranks, one thread each, every rank with its
// own Gloo process group over a shared FileStore; rethrows the first rank's exception.
#pragma once

#include <ATen/Parallel.h>

#include <atomic>
#include <exception>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "validate/communicator.hpp"

namespace osdp::validate::testing {

inline std::string temporary_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  std::random_device device;
  return (std::filesystem::temp_directory_path() /
          (stem + "-" + std::to_string(device()) + "-" + std::to_string(counter++)))
      .string();
}

inline void run_rank_threads(int world, const std::function<void(Communicator&)>& body,
                             std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  at::set_num_threads(1);
  const std::string store = temporary_path("osdp-store");
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto communicator =
            Communicator::connect(local_rank_connection(rank, world, store, timeout));
        body(*communicator);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::filesystem::remove(store);
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace osdp::validate::testing
