// `osdp validate --layouts tp2,pp2:gpipe,tp2xdp2`: tensor x pipeline x data layouts trained in the
// runtime (validate/parallel_gpt) beside the data-parallel plans, and costed by the 3D model
// (model/parallel_iteration) for the comparison.
#pragma once

#include <string>
#include <vector>

#include "model/scenario.hpp"
#include "search/layout_search.hpp"
#include "validate/comparison.hpp"
#include "validate/measurement.hpp"

namespace osdp::cli {

// One layout per comma-separated item: axes joined by 'x' (tp<N>, pp<N>, dp<N>; the data degree
// defaults to the ranks left), then ":gpipe", ":1f1b" or ":interleaved" (default 1f1b; ":v<N>"
// chunks per stage), ":m<N>" micro-batches (default 2 x pp with a pipeline, else 1), ":z1" or
// ":z2" (ZeRO-1 or ZeRO-2 in the data-parallel group; default replicated, DDP; ":dp" names it)
// and ":zdp<K>" (3D + OSDP: the first K layers of every stage ZDP, the rest z2 unless ":dp" or
// ":z1" says otherwise). Each micro-batch has
// `micro_batch` samples per data-parallel rank. The run is named after the item ("pp2-gpipe-m4").
// InputError naming `flag` and the item when it is malformed or its degrees do not multiply to
// `ranks`.
std::vector<validate::PlanRun> parse_layouts(const std::string& flag, const std::string& text,
                                             const Scenario& scenario, int ranks, int micro_batch);

// The 3D model's figures of a layout run: iteration time, the largest stage's peak memory and
// the time the busiest stage does not compute (communication it waits for and the bubble).
// With `trace_path`, its timeline goes there as a Chrome / Perfetto trace.
validate::SimulatedFigures predict_layout(const Scenario& scenario, const ParallelRun& run,
                                          const std::string& source,
                                          const std::string& trace_path = "");

// The `--layouts` item that trains `plan` in the runtime as the 3D model costs it (at the plan's
// micro-batch, `--batch`), or, in `why_not`, what the runtime does not run (checkpointing, an
// uneven layer split, different ZDP counts per stage).
struct RuntimeLayoutItem {
  std::string item;
  std::string why_not;
};
RuntimeLayoutItem runtime_layout_item(const Scenario& scenario, const LayoutPlan& plan);

}  // namespace osdp::cli
