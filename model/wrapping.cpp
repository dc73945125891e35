#include "model/wrapping.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>

namespace osdp {
namespace {

// "100M", "1.5B": a parameter count in a rule's description.
std::string short_count(double count) {
  if (count >= 1e9) return fmt::format("{:g}B", count / 1e9);
  if (count >= 1e6) return fmt::format("{:g}M", count / 1e6);
  if (count >= 1e3) return fmt::format("{:g}k", count / 1e3);
  return fmt::format("{:g}", count);
}

std::string block_of(const std::string& name) { return name.substr(0, name.find('.')); }

std::vector<int> per_block_sizes(const Workload& workload, int blocks_per_unit) {
  std::vector<int> block_sizes;
  std::string previous;
  for (int op : workload.execution_order()) {
    const std::string block = block_of(workload.op(op).name);
    if (block_sizes.empty() || block != previous) {
      block_sizes.push_back(1);
    } else {
      ++block_sizes.back();
    }
    previous = block;
  }
  std::vector<int> sizes;
  for (std::size_t b = 0; b < block_sizes.size(); ++b) {
    if (b % static_cast<std::size_t>(std::max(1, blocks_per_unit)) == 0) sizes.push_back(0);
    sizes.back() += block_sizes[b];
  }
  return sizes;
}

std::vector<int> min_parameter_sizes(const Workload& workload, double min_parameters) {
  std::vector<int> sizes;
  double open_parameters = 0;
  int open = 0;
  for (int op : workload.execution_order()) {
    ++open;
    open_parameters += workload.op(op).parameter_count;
    if (open_parameters >= min_parameters) {
      sizes.push_back(open);
      open = 0;
      open_parameters = 0;
    }
  }
  if (open > 0) {
    if (sizes.empty()) {
      sizes.push_back(open);
    } else {
      sizes.back() += open;  // the root unit takes what no unit reached the minimum with
    }
  }
  return sizes;
}

Operator merge(const Workload& workload, const std::vector<int>& members) {
  if (members.size() == 1) return workload.op(members.front());
  Operator unit;
  unit.kind = OperatorKind::generic;
  unit.splittable = false;
  bool checkpointable = true;
  for (int index : members) {
    const Operator& op = workload.op(index);
    unit.parameter_count += op.parameter_count;
    unit.parameter_bytes += op.parameter_bytes;
    unit.gradient_bytes += op.gradient_bytes;
    unit.optimizer_bytes += op.optimizer_bytes;
    unit.activation_bytes_per_sample += op.activation_bytes_per_sample;
    unit.extra_bytes += op.extra_bytes;
    unit.workspace_bytes_per_sample =
        std::max(unit.workspace_bytes_per_sample, op.workspace_bytes_per_sample);
    unit.forward_flops_per_sample += op.forward_flops_per_sample;
    unit.backward_flops_per_sample += op.backward_flops_per_sample;
    unit.score_forward_flops_per_sample += op.score_forward_flops_per_sample;
    unit.score_backward_flops_per_sample += op.score_backward_flops_per_sample;
    unit.score_rows_per_sample += op.score_rows_per_sample;
    checkpointable = checkpointable && op.input_activation_bytes_per_sample.has_value();
    unit.members.push_back(op);
  }
  if (checkpointable) {
    unit.input_activation_bytes_per_sample =
        workload.op(members.front()).input_activation_bytes_per_sample;
  }
  unit.output_bytes_per_sample = workload.op(members.back()).output_bytes_per_sample;
  return unit;
}

}  // namespace

std::string WrappingRule::describe() const {
  switch (kind) {
    case Kind::per_operator:
      return "one unit per operator";
    case Kind::per_block:
      return blocks_per_unit == 1 ? "one unit per block"
                                  : fmt::format("one unit per {} blocks", blocks_per_unit);
    case Kind::min_parameters:
      return fmt::format("units of >= {} parameters", short_count(min_parameters));
  }
  return "?";
}

std::vector<int> unit_sizes(const Workload& workload, const WrappingRule& rule) {
  switch (rule.kind) {
    case WrappingRule::Kind::per_operator:
      return std::vector<int>(workload.size(), 1);
    case WrappingRule::Kind::per_block:
      return per_block_sizes(workload, rule.blocks_per_unit);
    case WrappingRule::Kind::min_parameters:
      return min_parameter_sizes(workload, rule.min_parameters);
  }
  return {};
}

bool valid_unit_sizes(const Workload& workload, const std::vector<int>& sizes) {
  if (sizes.empty()) return false;
  long long total = 0;
  for (int size : sizes) {
    if (size < 1) return false;
    total += size;
  }
  return total == workload.size();
}

bool wraps(const Plan& plan, const Workload& workload) {
  return !plan.unit_sizes.empty() && valid_unit_sizes(workload, plan.unit_sizes) &&
         static_cast<int>(plan.choices.size()) != workload.size();
}

std::string unit_name(const Workload& workload, int first, int count) {
  const auto& order = workload.execution_order();
  if (count <= 0) return "";
  if (count == 1) return workload.op(order[first]).name;
  return workload.op(order[first]).name + ".." + workload.op(order[first + count - 1]).name;
}

Workload wrap_workload(const Workload& workload, const std::vector<int>& sizes) {
  if (!valid_unit_sizes(workload, sizes)) {
    throw std::invalid_argument("wrap_workload: unit sizes that do not cover the operators");
  }
  const auto& order = workload.execution_order();
  std::vector<int> unit_of(workload.size(), 0);
  std::vector<Operator> units;
  units.reserve(sizes.size());
  int position = 0;
  for (std::size_t u = 0; u < sizes.size(); ++u) {
    std::vector<int> members(order.begin() + position, order.begin() + position + sizes[u]);
    for (int member : members) unit_of[member] = static_cast<int>(u);
    Operator unit = merge(workload, members);
    unit.name = unit_name(workload, position, sizes[u]);
    units.push_back(std::move(unit));
    position += sizes[u];
  }
  std::set<std::pair<int, int>> edges;
  const auto [begin, end] = boost::edges(workload.graph());
  for (auto edge = begin; edge != end; ++edge) {
    const int from = unit_of[boost::source(*edge, workload.graph())];
    const int to = unit_of[boost::target(*edge, workload.graph())];
    if (from != to) edges.emplace(from, to);
  }
  return Workload(workload.name(), std::move(units), {edges.begin(), edges.end()});
}

std::string describe_units(const std::vector<int>& sizes) {
  std::string runs;
  for (std::size_t i = 0; i < sizes.size();) {
    std::size_t j = i;
    while (j < sizes.size() && sizes[j] == sizes[i]) ++j;
    runs += (runs.empty() ? "" : ", ") +
            (j - i == 1 ? std::to_string(sizes[i]) : fmt::format("{} (x{})", sizes[i], j - i));
    i = j;
  }
  return fmt::format("{} unit{} (operators per unit: {})", sizes.size(),
                     sizes.size() == 1 ? "" : "s", runs);
}

}  // namespace osdp
