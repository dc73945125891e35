#include "sim/ring_collective.hpp"

#include <memory>

namespace osdp::sim {
namespace {

struct RingRun {
  Kernel* kernel;
  const GroupRing* ring;
  CollectiveKind kind;
  double step_bytes;
  int steps;
  Granularity granularity;
  std::function<void()> done;
  int round = 0;
  int outstanding = 0;
};

void start_round(const std::shared_ptr<RingRun>& run);

void flow_done(const std::shared_ptr<RingRun>& run) {
  if (--run->outstanding > 0) return;
  ++run->round;
  const int rounds = run->granularity == Granularity::step ? run->steps : 1;
  if (run->round < rounds) {
    start_round(run);
  } else {
    run->done();
  }
}

void start_round(const std::shared_ptr<RingRun>& run) {
  const GroupRing& ring = *run->ring;
  const bool scale = run->granularity == Granularity::scale;
  const int steps_in_flow = scale ? run->steps : 1;
  const double bytes = run->step_bytes * steps_in_flow;
  int flows = 0;
  for (const auto& edge : ring.edges) flows += static_cast<int>(edge.channels.size());
  run->outstanding = flows;
  for (const auto& edge : ring.edges) {
    for (const auto& channel : edge.channels) {
      const double channel_bytes = bytes * channel.share;
      auto done = [run]() { flow_done(run); };
      if (ring.logical) {
        const AlphaBeta ab = ring.logical->of(run->kind).at(run->step_bytes);
        const double latency_s = steps_in_flow * ab.alpha_s;
        const double units = channel_bytes * ab.beta_s_per_byte * logical_units_per_s;
        if (units < 1.0) {
          run->kernel->after(latency_s + channel_bytes * ab.beta_s_per_byte, std::move(done));
        } else {
          run->kernel->send(channel, units, latency_s, std::move(done));
        }
      } else {
        // The route's own latency is paid by the flow; scale mode adds the other steps'.
        const double delay_s = scale ? steps_in_flow * ring.alpha_s - channel.latency_s : 0.0;
        run->kernel->send(channel, channel_bytes, delay_s, std::move(done));
      }
    }
  }
}

}  // namespace

void start_ring_collective(Kernel& kernel, const GroupRing& ring, CollectiveKind kind,
                           double full_bytes, Granularity granularity, std::function<void()> done) {
  const int n = static_cast<int>(ring.order.size());
  const int steps = ring_steps(kind, n);
  if (steps == 0 || ring.edges.empty()) {
    kernel.after(0.0, std::move(done));
    return;
  }
  auto run = std::make_shared<RingRun>(RingRun{&kernel, &ring, kind, ring_step_bytes(full_bytes, n),
                                               steps, granularity, std::move(done)});
  start_round(run);
}

}  // namespace osdp::sim
