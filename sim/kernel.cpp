#include "sim/kernel.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>
#include <stdexcept>
#include <string>

namespace osdp::sim {

namespace sg4 = simgrid::s4u;

struct Kernel::State {
  std::unique_ptr<sg4::Engine> engine;
  std::map<Endpoint, sg4::Host*> hosts;
  // Flows in flight: the activity, and what to call when it completes.
  std::unordered_map<const sg4::Activity*, std::pair<sg4::CommPtr, std::function<void()>>> running;
  // Completed flows are released once the clock has moved on, never inside their own callback.
  std::vector<sg4::CommPtr> finished;
  double finished_at = -1;
  // Callbacks due at the same date share one SimGrid timer (symmetric ranks end together).
  std::map<double, std::vector<std::function<void()>>> due;
};

namespace {

// SimGrid parses its options from argv; the log threshold must come first to silence the
// configuration messages.
std::vector<std::string> engine_arguments(const NetworkConfig& config) {
  return {"osdp-sim", "--log=root.thresh:critical", "--cfg=network/model:" + config.model,
          std::string("--cfg=network/crosstraffic:") + (config.crosstraffic ? "1" : "0"),
          fmt::format("--cfg=network/TCP-gamma:{}", config.tcp_gamma)};
}

}  // namespace

Kernel::Kernel(const NetworkPlan& plan, const NetworkConfig& config, bool ring_routes)
    : state_(std::make_unique<State>()), rings_in_flight_(plan) {
  std::vector<std::string> arguments = engine_arguments(config);
  std::vector<char*> argv;
  for (auto& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(arguments.size());
  state_->engine = std::make_unique<sg4::Engine>(&argc, argv.data());

  auto* zone = sg4::create_full_zone("cluster");
  // Hosts for every endpoint, links for every route, then the routes.
  std::set<std::pair<Endpoint, Endpoint>> routed;
  std::vector<sg4::Link*> up(plan.links.size(), nullptr);
  std::vector<sg4::Link*> down(plan.links.size(), nullptr);
  auto host_of = [&](const Endpoint& endpoint) {
    auto [it, inserted] = state_->hosts.try_emplace(endpoint, nullptr);
    if (inserted) {
      const std::string name =
          endpoint.tag == host_memory_tag ? fmt::format("memory{}", endpoint.rank)
          : endpoint.tag < 0              ? fmt::format("gpu{}", endpoint.rank)
                                          : fmt::format("gpu{}.{}", endpoint.rank, endpoint.tag);
      it->second = zone->create_host(name, 1.0);
    }
    return it->second;
  };
  auto link_of = [&](const Hop& hop) {
    const FabricLink& link = plan.links.at(hop.link);
    if (up[hop.link] == nullptr) {
      if (plan.split_duplex) {
        auto* duplex = zone->create_split_duplex_link(link.name, link.link.bandwidth_Bps);
        up[hop.link] = duplex->get_link_up();
        down[hop.link] = duplex->get_link_down();
      } else {
        auto* shared = zone->create_link(link.name, link.link.bandwidth_Bps);
        up[hop.link] = down[hop.link] = shared;
      }
    }
    return hop.up ? up[hop.link] : down[hop.link];
  };
  auto add_route = [&](const Channel& channel) {
    sg4::Host* from = host_of(channel.from);
    sg4::Host* to = host_of(channel.to);
    if (!routed.insert({channel.from, channel.to}).second) return;
    std::vector<sg4::LinkInRoute> route;
    for (const Hop& hop : channel.hops) {
      if (plan.links.at(hop.link).ideal) continue;
      route.emplace_back(link_of(hop));
    }
    zone->add_route(from->get_netpoint(), to->get_netpoint(), nullptr, nullptr, route, false);
  };
  for (const auto& ring : plan.rings) {
    if (!ring_routes && !ring.logical) continue;
    for (const auto& edge : ring.edges) {
      for (const auto& channel : edge.channels) add_route(channel);
    }
  }
  for (const HostChannels& channels : plan.host_channels) {
    add_route(channels.to_host);
    add_route(channels.to_device);
  }
  zone->seal();
  sg4::Activity::on_completion_cb(
      [this](const sg4::Activity& activity) { on_completion(activity); });
}

Kernel::~Kernel() = default;

double Kernel::now() const { return sg4::Engine::get_clock(); }

void Kernel::after(double delay_s, std::function<void()> done) {
  const double date = now() + delay_s;
  auto [it, first] = state_->due.try_emplace(date);
  it->second.push_back(std::move(done));
  if (!first) return;
  ++timers_;
  simgrid::kernel::timer::Timer::set(date, [this, date]() {
    // Taken out first: callbacks may schedule more at this same date, under a new timer.
    auto batch = state_->due.extract(date);
    for (auto& callback : batch.mapped()) callback();
  });
}

void Kernel::send(const Channel& channel, double bytes, double delay_s,
                  std::function<void()> done) {
  if (channel.latency_s > 0) {
    done = [this, latency_s = channel.latency_s, done = std::move(done)]() mutable {
      after(latency_s, std::move(done));
    };
  }
  transfer(channel, bytes, delay_s, std::move(done));
}

void Kernel::transfer(const Channel& channel, double bytes, double delay_s,
                      std::function<void()> done) {
  if (delay_s > 0) {
    after(delay_s, [this, &channel, bytes, done = std::move(done)]() mutable {
      start_flow(channel, bytes, std::move(done));
    });
  } else {
    start_flow(channel, bytes, std::move(done));
  }
}

void Kernel::start_flow(const Channel& channel, double bytes, std::function<void()> done) {
  ++flows_;
  auto comm = sg4::Comm::sendto_init(state_->hosts.at(channel.from), state_->hosts.at(channel.to));
  comm->set_payload_size(static_cast<std::uint64_t>(std::llround(bytes)));
  const sg4::Activity* key = comm.get();
  state_->running.emplace(key, std::make_pair(comm, std::move(done)));
  comm->start();
}

void Kernel::on_completion(const sg4::Activity& activity) {
  auto it = state_->running.find(&activity);
  if (it == state_->running.end()) return;
  if (state_->finished_at < now()) {
    state_->finished.clear();
    state_->finished_at = now();
  }
  state_->finished.push_back(std::move(it->second.first));
  std::function<void()> done = std::move(it->second.second);
  state_->running.erase(it);
  done();
}

void Kernel::run() {
  state_->engine->run();
  if (!state_->running.empty()) throw std::logic_error("sim: flows still running at the end");
}

}  // namespace osdp::sim
