#include "sim/ring_collective.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <vector>

namespace osdp::sim {
namespace {

struct RingRun {
  Kernel* kernel;
  const GroupRing* ring;
  CollectiveKind kind;
  double step_bytes;  // on the wire: the protocol's overhead included
  int steps;
  Granularity granularity;
  std::function<void()> done;
  double step_alpha_s = 0;  // the ring's alpha, or the chosen protocol's
  int steps_done = 0;
  int steps_in_round = 0;
  int outstanding = 0;
};

// A contended scale-mode ring moves in rounds of at most this fraction of its steps: every
// step up to 64 ranks (as step mode), 64 rounds of several steps beyond.
constexpr int max_contended_rounds = 64;

// Step mode: one step per round. Scale mode: every step left in one round while no other ring
// in flight slows this one down; otherwise step-mode rounds (up to 64 per collective). Step
// mode's per-round barrier lets a ring's fast edges idle and leave shared links to the other
// rings, which one long flow per edge would not (measured +10% to +30% on asymmetric PCIe
// contention); a ring alone, or sharing links only with its own other collectives, is exact.
int steps_in_next_round(const RingRun& run) {
  const int left = run.steps - run.steps_done;
  if (run.granularity != Granularity::scale) return 1;
  if (!run.kernel->rings_in_flight().slowed_by_others(*run.ring)) return left;
  const int contended_round = (run.steps + max_contended_rounds - 1) / max_contended_rounds;
  return std::min(left, contended_round);
}

void start_round(const std::shared_ptr<RingRun>& run);

void advance(const std::shared_ptr<RingRun>& run) {
  run->steps_done += run->steps_in_round;
  if (run->steps_done < run->steps) {
    start_round(run);
  } else {
    run->kernel->rings_in_flight().end(*run->ring);
    run->done();
  }
}

// A topology ring's round ends when its bytes have crossed every edge and then each step's
// latency has passed: NCCL's rings pipeline a step's chunks hop by hop, so a step costs the
// ring's mean hop latency, not its slowest edge's (GroupRing::alpha_s).
void flow_done(const std::shared_ptr<RingRun>& run) {
  if (--run->outstanding > 0) return;
  const double latency_s = run->ring->logical ? 0.0 : run->steps_in_round * run->step_alpha_s;
  if (latency_s > 0) {
    run->kernel->after(latency_s, [run]() { advance(run); });
  } else {
    advance(run);
  }
}

void start_round(const std::shared_ptr<RingRun>& run) {
  const GroupRing& ring = *run->ring;
  run->steps_in_round = steps_in_next_round(*run);
  const int steps_in_flow = run->steps_in_round;
  const double bytes = run->step_bytes * steps_in_flow;
  // Flows grouped by the delay before they start: one timer per group, not one per flow.
  struct Send {
    const Channel* channel;
    double amount;  // bytes, or logical units
    bool flow;      // false: a pure delay (logical rings too fast to need a flow)
  };
  std::map<double, std::vector<Send>> by_delay;
  int flows = 0;
  for (const auto& edge : ring.edges) {
    for (const auto& channel : edge.channels) {
      ++flows;
      const double channel_bytes = bytes * channel.share;
      if (ring.logical) {
        const AlphaBeta ab = ring.logical->of(run->kind).at(run->step_bytes);
        const double latency_s = steps_in_flow * ab.alpha_s;
        const double units = channel_bytes * ab.beta_s_per_byte * logical_units_per_s;
        if (units < 1.0) {
          by_delay[latency_s + channel_bytes * ab.beta_s_per_byte].push_back(
              {&channel, 0.0, false});
        } else {
          by_delay[latency_s].push_back({&channel, units, true});
        }
      } else {
        by_delay[0.0].push_back({&channel, channel_bytes, true});
      }
    }
  }
  run->outstanding = flows;
  for (auto& [delay_s, sends] : by_delay) {
    bool pure_delays = false;
    for (const Send& send : sends) pure_delays = pure_delays || !send.flow;
    auto start = [run, sends = std::move(sends)]() {
      for (const Send& send : sends) {
        if (send.flow) {
          run->kernel->transfer(*send.channel, send.amount, 0.0, [run]() { flow_done(run); });
        } else {
          flow_done(run);
        }
      }
    };
    // Pure delays always go through a timer: a collective never completes inside its own start.
    if (delay_s > 0 || pure_delays) {
      run->kernel->after(delay_s, std::move(start));
    } else {
      start();
    }
  }
}

// The protocol NCCL would run for this collective on this ring (rings of clusters that declare
// `"collectives": "nccl"`), from the ring's own latencies and its rate alone on the network.
CollectiveChoice nccl_choice(const GroupRing& ring, CollectiveKind kind, double full_bytes) {
  RingShape shape;
  shape.ranks = static_cast<int>(ring.order.size());
  shape.nodes = ring.nodes;
  shape.inter_alpha_s = ring.inter_alpha_s;
  shape.intra_alpha_s = ring.alpha_s - ring.inter_alpha_s;
  shape.beta_s_per_byte =
      std::isfinite(ring.alone_edge_rate_Bps) ? 1.0 / ring.alone_edge_rate_Bps : 0.0;
  return choose_collective(*ring.nccl, kind, full_bytes, shape);
}

}  // namespace

void start_ring_collective(Kernel& kernel, const GroupRing& ring, CollectiveKind kind,
                           double full_bytes, Granularity granularity, std::function<void()> done,
                           bool alone) {
  const int n = static_cast<int>(ring.order.size());
  const int steps = ring_steps(kind, n);
  if (steps == 0 || ring.edges.empty()) {
    kernel.after(0.0, std::move(done));
    return;
  }
  double step_alpha_s = ring.alpha_s;
  double byte_factor = 1.0;
  if (ring.nccl && !ring.logical) {
    const CollectiveChoice choice = nccl_choice(ring, kind, full_bytes);
    if (choice.algorithm == CollectiveAlgorithm::tree) {
      // NCCL's tree all-reduce (small buffers across nodes): its uncontended time, as a timer.
      kernel.after(choice.time_s, std::move(done));
      return;
    }
    step_alpha_s = choice.step_alpha_s;
    byte_factor = choice.byte_factor;
  }
  const double step_bytes = ring_step_bytes(full_bytes, n) * byte_factor;
  if (alone && granularity == Granularity::scale && !ring.logical &&
      std::isfinite(ring.alone_edge_rate_Bps)) {
    kernel.after(steps * (step_alpha_s + step_bytes / ring.alone_edge_rate_Bps), std::move(done));
    return;
  }
  auto run = std::make_shared<RingRun>(
      RingRun{&kernel, &ring, kind, step_bytes, steps, granularity, std::move(done)});
  run->step_alpha_s = step_alpha_s;
  kernel.rings_in_flight().begin(ring);
  // The first round is laid out once every ring starting at this date is in flight.
  kernel.after(0.0, [run]() { start_round(run); });
}

}  // namespace osdp::sim
