// CPU offload in the runtime: offloaded states live in the host arena (counted apart from the
// device's memory), the optimizer steps there, and training leaves the parameters of the
// single-process run, for FSDP's CPUOffload (zdp, hsdp) and ZeRO-Offload (z2, z1).
#include <map>
#include <mutex>

#include "tests/validate/rank_threads.hpp"
#include "tests/validate/tiny_parity.hpp"
#include "validate/counting_allocator.hpp"
#include "validate/reference_gpt.hpp"
#include "validate/sharded_gpt.hpp"

// libtorch pulls in glog, whose CHECK would shadow Catch's.
#undef CHECK
#include <catch2/catch.hpp>

using namespace osdp;
using namespace osdp::validate;
using namespace osdp::validate::testing;

namespace {

Plan uniform(OperatorChoice choice) {
  Plan plan;
  plan.batch_size = batch_per_rank;
  plan.choices.assign(tiny.operators(), choice);
  return plan;
}

struct Persistent {
  std::int64_t device_bytes = 0;  // rank 0's count of its states
  std::int64_t host_bytes = 0;    // the host arena's live bytes after a step, both ranks
};

Persistent persistent(const Plan& plan) {
  install_counting_allocator();
  Persistent result;
  std::mutex mutex;
  const std::int64_t host_before = host_memory_counts().live_bytes;
  testing::run_rank_threads(2, [&](Communicator& comm) {
    ShardedGpt model(tiny, plan, comm, initial_gpt_parameters(tiny, 5), {});
    const TokenBatch batch = make_token_batch(tiny, 4, 3, 0).rows(comm.rank() * 2, 2);
    model.train_step(batch);
    comm.barrier();  // both ranks' states alive while rank 0 counts
    if (comm.rank() == 0) {
      std::lock_guard lock(mutex);
      result.device_bytes = model.persistent_bytes();
      result.host_bytes = host_memory_counts().live_bytes - host_before;
    }
    comm.barrier();
  });
  return result;
}

}  // namespace

TEST_CASE("offload: parity with the single-process run", "[validate][offload]") {
  for (const Mode mode : {Mode::zdp, Mode::z2, Mode::z1}) {
    INFO("mode " << mode_name(mode));
    CHECK(parity_error(uniform(OperatorChoice::whole(mode, Checkpoint::none, true)), 2) < 1e-5);
  }
  // Mixed with the rest: offloaded slices beside DP ones, checkpointing, 3 ranks.
  Plan mixed = uniform(OperatorChoice::whole(Mode::dp));
  mixed.choices[1] = {Mode::zdp, 2, 1, Checkpoint::unfused, true};
  mixed.choices[2] = OperatorChoice::whole(Mode::z1, Checkpoint::fused, true);
  mixed.choices[3] = OperatorChoice::whole(Mode::z2, Checkpoint::none, true);
  mixed.choices[5] = OperatorChoice::whole(Mode::zdp);
  CHECK(parity_error(mixed, 3) < 1e-5);
}

TEST_CASE("offload: the states leave the device for the host arena", "[validate][offload]") {
  const double parameters = make_gpt(tiny.spec(), Training{}).parameter_count();
  const Persistent fsdp = persistent(uniform(OperatorChoice::whole(Mode::zdp)));
  const Persistent offloaded =
      persistent(uniform(OperatorChoice::whole(Mode::zdp, Checkpoint::none, true)));
  // FSDP CPUOffload: nothing of the model states on the device; parameters, gradient and
  // Adam's two moments, 16 bytes a parameter, halved on 2 ranks, in host memory.
  CHECK(offloaded.device_bytes == 0);
  CHECK(fsdp.device_bytes == Approx(16 * parameters / 2).epsilon(1e-3));
  CHECK(offloaded.host_bytes == Approx(2 * 16 * parameters / 2).epsilon(1e-3));
  // ZeRO-Offload on Z2: the parameter shard stays; gradient shard and moments go.
  const Persistent zero2 =
      persistent(uniform(OperatorChoice::whole(Mode::z2, Checkpoint::none, true)));
  CHECK(zero2.device_bytes == Approx(4 * parameters / 2).epsilon(1e-3));
  CHECK(zero2.host_bytes == Approx(2 * 12 * parameters / 2).epsilon(1e-3));
}
