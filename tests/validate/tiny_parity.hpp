// Test helper: parity of a plan on the tiny GPT with the single-process run (the same data,
// `steps` steps, Adam), as the offload and FSDP-unit tests check it.
#pragma once

#include <map>
#include <mutex>

#include "tests/validate/rank_threads.hpp"
#include "validate/reference_gpt.hpp"
#include "validate/sharded_gpt.hpp"

namespace osdp::validate::testing {

inline const GptShape tiny{2, 64, 4, 16, 128};  // embedding, 2 x (attention, mlp), head
inline constexpr int steps = 3;
inline constexpr int batch_per_rank = 2;
inline constexpr std::uint64_t data_seed = 11;

// The single-process run on the concatenated batch of `world` ranks (computed once per world).
inline const NamedTensors& reference_parameters(int world) {
  static std::mutex mutex;
  static std::map<int, NamedTensors> runs;
  std::lock_guard lock(mutex);
  auto found = runs.find(world);
  if (found == runs.end()) {
    found = runs.emplace(world, train_reference_gpt(tiny, initial_gpt_parameters(tiny, 5),
                                                    world * batch_per_rank, data_seed, steps, {})
                                    .parameters)
                .first;
  }
  return found->second;
}

// The largest relative difference between rank 0's parameters after `plan` on `world` ranks and
// the single-process run's.
// The sharded run may compute attention with another kernel (same result, other memory).
inline double parity_error(const Plan& plan, int world, RuntimeOptions options = {},
                           AttentionKernel attention = AttentionKernel::standard) {
  NamedTensors result;
  std::mutex mutex;
  GptShape shape = tiny;
  shape.attention = attention;
  run_rank_threads(world, [&](Communicator& comm) {
    ShardedGpt model(shape, plan, comm, initial_gpt_parameters(tiny, 5), options);
    for (int step = 0; step < steps; ++step) {
      const TokenBatch global = make_token_batch(tiny, world * batch_per_rank, data_seed, step);
      model.train_step(global.rows(comm.rank() * batch_per_rank, batch_per_rank));
    }
    NamedTensors parameters = model.full_parameters();
    std::lock_guard lock(mutex);
    if (comm.rank() == 0) result = std::move(parameters);
  });
  return parity_difference(result, reference_parameters(world), tiny);
}

}  // namespace osdp::validate::testing
