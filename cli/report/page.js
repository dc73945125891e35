// osdp report: draws the figures of the page from the JSON in #report-data (hand-written, no
// library; everything the page shows is in the page).
"use strict";

(function () {
  const errors = [];
  function recordError(message) {
    errors.push(message);
    document.getElementById("page-errors").textContent = errors.join("\n");
    document.body.dataset.errors = String(errors.length);
  }
  window.addEventListener("error", (event) => recordError(String(event.message)));

  const SVG = "http://www.w3.org/2000/svg";
  const MODE_COLOURS = { dp: "#4e79a7", zdp: "#e15759", z2: "#f28e2b", z1: "#76b7b2",
                         hsdp: "#b07aa1", osdp: "#59a14f" };
  const MEMORY_PARTS = [["model_state_bytes", "model states", "#4e79a7"],
                        ["activation_bytes", "activations", "#f28e2b"],
                        ["extra_bytes", "extra (buffers)", "#bab0ac"],
                        ["transient_bytes", "transient", "#e15759"]];
  const CATEGORY_COLOURS = { forward: "#4e79a7", backward: "#2f5b84", recompute: "#9c755f",
                             optimizer: "#59a14f", ag_forward: "#e15759", ag_backward: "#ff9d9a",
                             ag_recompute: "#b07aa1", reduce_scatter: "#f28e2b",
                             all_reduce: "#edc948", ag_after_step: "#76b7b2" };
  const MEMORY_COLOURS = { model_states: "#4e79a7", extra: "#bab0ac", activations: "#f28e2b",
                           recomputed_activations: "#9c755f", gathered_parameters: "#e15759",
                           unsharded_gradients: "#b07aa1", workspace: "#76b7b2" };
  const SERIES_COLOURS = ["#59a14f", "#4e79a7", "#e15759", "#f28e2b", "#76b7b2", "#edc948",
                          "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#2f5b84", "#8cd17d",
                          "#d37295", "#499894", "#a0cbe8", "#ffbe7d", "#79706e", "#d4a6c8"];

  function element(name, attributes, parent) {
    const node = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
    if (parent) parent.appendChild(node);
    return node;
  }
  function text(parent, x, y, content, attributes) {
    const node = element("text", Object.assign({ x: x, y: y }, attributes || {}), parent);
    node.textContent = content;
    return node;
  }
  function svg(width, height) {
    return element("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
                            preserveAspectRatio: "xMinYMin meet" });
  }
  function html(tag, content, attributes) {
    const node = document.createElement(tag);
    if (content !== undefined) node.textContent = content;
    for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
    return node;
  }
  function bytes(value) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let unit = 0;
    while (Math.abs(value) >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
    return `${value.toFixed(unit === 0 ? 0 : value < 10 ? 2 : 1)} ${units[unit]}`;
  }
  function seconds(value) {
    if (value >= 1) return `${value.toFixed(3)} s`;
    if (value >= 1e-3) return `${(value * 1e3).toFixed(2)} ms`;
    return `${(value * 1e6).toFixed(1)} us`;
  }
  function legend(container, entries) {
    for (const [label, colour] of entries) {
      const item = html("span");
      const swatch = html("i");
      swatch.style.background = colour;
      item.append(swatch, document.createTextNode(label));
      container.appendChild(item);
    }
  }
  // Round axis ticks: about `count` of them from 0 to max.
  function ticks(max, count) {
    const raw = max / count;
    const magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) || raw;
    const values = [];
    for (let value = 0; value <= max * 1.0001; value += step) values.push(value);
    return values;
  }
  // A tick's label: as many decimals as it has (2.5, 10, 12.5), none of the float noise.
  function tickLabel(value) {
    return String(Number(value.toFixed(2)));
  }

  function drawSummary(data) {
    document.title = `osdp report: ${data.scenario}`;
    document.getElementById("title").textContent =
      `${data.scenario}: ${data.model} on ${data.ranks} GPUs`;
    document.getElementById("subtitle").textContent = data.description || "";
    const plan = data.plan;
    const counts = {};
    for (const op of data.operators) counts[op.choice.mode] = (counts[op.choice.mode] || 0) + 1;
    const mix = Object.entries(counts).map(([mode, n]) => `${n} ${mode}`).join(", ");
    document.getElementById("summary-text").textContent =
      `At most ${bytes(data.memory_limit_bytes)} per GPU, the best plan runs ${plan.batch_size} ` +
      `samples per GPU per micro-batch (${data.accumulation_steps} micro-batch` +
      `${data.accumulation_steps > 1 ? "es" : ""} per iteration) with ${mix} of its ` +
      `${data.operators.length} operators, and trains ` +
      `${plan.throughput_samples_per_s.toFixed(1)} samples per second on ${data.ranks} GPUs. ` +
      `Its peak memory is ${bytes(plan.peak_memory_bytes)}, mostly ${plan.dominant_part}.`;
    const facts = [["cluster", `${data.cluster} (${data.ranks} GPUs, ${data.gpus_per_node} per node)`],
                   ["GPU memory / limit", `${bytes(data.gpu_memory_bytes)} / ${bytes(data.memory_limit_bytes)}`],
                   ["search", data.search],
                   ["FSDP units", data.units],
                   ["iteration", seconds(plan.iteration_time_s)],
                   ["compute / communication", `${seconds(plan.compute_s)} / ${seconds(plan.communication_s)}`],
                   ["exposed communication", seconds(plan.exposed_communication_s)],
                   ["cost model", data.cost_model]];
    const list = document.getElementById("facts");
    for (const [label, value] of facts) {
      const item = html("li");
      item.append(html("b", label), document.createTextNode(value));
      list.appendChild(item);
    }
  }

  function drawPlanMap(data) {
    const operators = data.operators;
    const perRow = Math.min(48, operators.length);
    const cell = Math.max(14, Math.floor(1120 / perRow));
    const height = 30;
    const rows = Math.ceil(operators.length / perRow);
    const picture = svg(perRow * cell + 20, rows * (height + 22) + 4);
    picture.id = "plan-map-svg";
    operators.forEach((op, index) => {
      const x = (index % perRow) * cell;
      const y = Math.floor(index / perRow) * (height + 22);
      const group = element("g", { class: "operator", transform: `translate(${x},${y})` }, picture);
      const title = element("title", {}, group);
      title.textContent = `${op.name} [${op.kind}]: ${op.choice.label}, ` +
        `${(op.parameters / 1e6).toFixed(2)} M parameters (${bytes(op.parameter_bytes)})`;
      const slices = op.choice.slices;
      const stripe = (cell - 2) / slices;
      for (let slice = 0; slice < slices; ++slice) {
        const sharded = slice < op.choice.sharded_slices;
        const colour = sharded || slices === 1 ? MODE_COLOURS[op.choice.mode] || "#999"
                                               : MODE_COLOURS.dp;
        element("rect", { x: 1 + slice * stripe, y: 0, width: Math.max(1, stripe - (slices > 1 ? 1 : 0)),
                          height: height, fill: colour }, group);
      }
      if (op.choice.checkpoint) {
        element("path", { d: `M${cell - 11},0 L${cell - 1},0 L${cell - 1},10 Z`, fill: "#1d232b" },
                group);
      }
      if (op.choice.offload) {
        element("rect", { x: 1, y: height - 5, width: cell - 2, height: 5, fill: "#1d232b" }, group);
      }
      if (index % perRow === 0 || (perRow > 12 && index % 8 === 0)) {
        text(group, 1, height + 14, op.name.length > 14 ? op.name.slice(0, 13) + "…" : op.name,
             { "font-size": 10, fill: "#5b6673" });
      }
    });
    document.getElementById("plan-map").appendChild(picture);
    const used = [...new Set(operators.map((op) => op.choice.mode))];
    legend(document.getElementById("plan-legend"),
           used.map((mode) => [mode, MODE_COLOURS[mode] || "#999"])
             .concat(operators.some((op) => op.choice.checkpoint)
                       ? [["checkpointed (dark triangle)", "#1d232b"]] : [])
             .concat(operators.some((op) => op.choice.offload)
                       ? [["offloaded (dark base)", "#1d232b"]] : []));
  }

  function drawMemoryBars(data) {
    const modes = data.modes;
    const limit = data.memory_limit_bytes;
    const max = Math.max(limit, ...modes.map((mode) => mode.cost.peak_memory_bytes)) * 1.05;
    const left = 150, width = 1000, barHeight = 26, gap = 12;
    const picture = svg(left + width + 120, modes.length * (barHeight + gap) + 40);
    picture.id = "memory-bars-svg";
    const scale = (value) => left + (value / max) * width;
    const axis = element("g", { class: "axis" }, picture);
    for (const value of ticks(max / 1073741824, 8)) {
      const x = scale(value * 1073741824);
      element("line", { x1: x, x2: x, y1: 0, y2: modes.length * (barHeight + gap), stroke: "#eef1f4" }, axis);
      text(axis, x, modes.length * (barHeight + gap) + 14, `${value} GiB`, { "text-anchor": "middle", "font-size": 11 });
    }
    modes.forEach((mode, row) => {
      const y = row * (barHeight + gap) + 4;
      text(picture, 0, y + 17, `${mode.name}`, { "font-weight": mode.name === "osdp" ? 700 : 500 });
      text(picture, 44, y + 17, mode.known_as.length > 16 ? mode.known_as.slice(0, 15) + "…" : mode.known_as,
           { "font-size": 11, fill: "#5b6673" });
      let x = left;
      for (const [key, label, colour] of MEMORY_PARTS) {
        const size = mode.cost[key] || 0;
        if (size <= 0) continue;
        const w = (size / max) * width;
        const rect = element("rect", { class: "memory-part", x: x, y: y, width: w, height: barHeight, fill: colour }, picture);
        element("title", {}, rect).textContent = `${mode.name}: ${label} ${bytes(size)}`;
        x += w;
      }
      const fits = mode.cost.fits;
      text(picture, x + 6, y + 17, `${bytes(mode.cost.peak_memory_bytes)}${fits ? "" : "  over the limit"}`,
           { "font-size": 12, fill: fits ? "#1d232b" : "#b3261e" });
    });
    const limitX = scale(limit);
    element("line", { x1: limitX, x2: limitX, y1: 0, y2: modes.length * (barHeight + gap),
                      stroke: "#1d232b", "stroke-dasharray": "5 4", "stroke-width": 1.5 }, picture);
    text(picture, limitX + 4, 10, `limit ${bytes(limit)}`, { "font-size": 11 });
    document.getElementById("memory-bars").appendChild(picture);
    legend(document.getElementById("memory-legend"), MEMORY_PARTS.map(([, label, colour]) => [label, colour]));

    // Collectives per iteration, per mode.
    const kinds = [...new Set(modes.flatMap((mode) => mode.collectives.map((c) => c.collective)))].sort();
    const table = html("table", undefined, { id: "collectives" });
    const head = html("tr");
    head.appendChild(html("th", "mode (batch " + data.plan.batch_size + ")"));
    for (const kind of kinds) head.appendChild(html("th", `${kind}s per iteration`));
    head.append(html("th", "communication"), html("th", "iteration"), html("th", "throughput"));
    table.appendChild(head);
    for (const mode of modes) {
      const row = html("tr", undefined, mode.name === "osdp" ? { class: "chosen" } : {});
      row.appendChild(html("td", mode.name));
      for (const kind of kinds) {
        const found = mode.collectives.find((c) => c.collective === kind);
        row.appendChild(html("td", found ? `${found.count} x, ${bytes(found.full_bytes)}` : "-"));
      }
      row.appendChild(html("td", seconds(mode.cost.communication_s)));
      row.appendChild(html("td", seconds(mode.cost.iteration_time_s)));
      const cell = html("td", mode.cost.fits ? `${mode.cost.throughput_samples_per_s.toFixed(1)} samples/s` : "does not fit");
      if (!mode.cost.fits) cell.className = "oom";
      row.appendChild(cell);
      table.appendChild(row);
    }
    document.getElementById("collectives-table").appendChild(table);

    const cards = document.getElementById("mode-cards");
    for (const mode of modes) {
      const card = html("div", undefined, { class: "mode" });
      const title = html("h3", `${mode.name}: ${mode.known_as}`);
      title.style.color = MODE_COLOURS[mode.name] || "#1d232b";
      card.appendChild(title);
      for (const [label, key] of [["keeps", "keeps"], ["sends", "sends"], ["wins", "wins"]]) {
        const line = html("p");
        line.append(html("b", `${label}: `), document.createTextNode(mode[key]));
        card.appendChild(line);
      }
      cards.appendChild(card);
    }
  }

  function drawThroughput(data) {
    const limits = data.throughput.memory_limits_bytes;
    const series = data.throughput.series;
    const left = 70, top = 10, width = 1000, height = 380;
    const picture = svg(left + width + 30, top + height + 50);
    picture.id = "throughput-svg";
    const xMax = Math.max(...limits) / 1073741824;
    const xMin = Math.min(...limits) / 1073741824;
    let yMax = 0;
    for (const s of series) for (const v of s.throughput_samples_per_s) if (v !== null) yMax = Math.max(yMax, v);
    yMax = yMax > 0 ? yMax * 1.08 : 1;
    const sx = (gib) => left + ((gib - xMin) / Math.max(1e-9, xMax - xMin)) * width;
    const sy = (value) => top + height - (value / yMax) * height;
    const axis = element("g", { class: "axis" }, picture);
    for (const value of ticks(yMax, 6)) {
      element("line", { x1: left, x2: left + width, y1: sy(value), y2: sy(value), stroke: "#eef1f4" }, axis);
      text(axis, left - 6, sy(value) + 4, tickLabel(value), { "text-anchor": "end", "font-size": 11 });
    }
    // Round ticks, not the sweep's points: those need not be round (1.5 GiB apart, 10.5 printed
    // as "11").
    for (const gib of ticks(xMax, 10).filter((gib) => gib >= xMin - 1e-9)) {
      element("line", { x1: sx(gib), x2: sx(gib), y1: top + height, y2: top + height + 4, stroke: "#5b6673" }, axis);
      text(axis, sx(gib), top + height + 16, tickLabel(gib), { "text-anchor": "middle", "font-size": 11 });
    }
    text(picture, left + width / 2, top + height + 38, "memory limit per GPU (GiB)", { "text-anchor": "middle" });
    text(picture, 14, top + height / 2, "samples / s", { transform: `rotate(-90 14 ${top + height / 2})`, "text-anchor": "middle" });
    const limitGib = data.memory_limit_bytes / 1073741824;
    if (limitGib >= xMin && limitGib <= xMax) {
      element("line", { x1: sx(limitGib), x2: sx(limitGib), y1: top, y2: top + height,
                        stroke: "#1d232b", "stroke-dasharray": "5 4" }, picture);
      text(picture, sx(limitGib) + 4, top + 12, "the scenario's limit", { "font-size": 11 });
    }
    const legendBox = document.getElementById("throughput-legend");
    series.forEach((s, index) => {
      const colour = SERIES_COLOURS[index % SERIES_COLOURS.length];
      const group = element("g", { class: "series", "data-name": s.name }, picture);
      // One polyline per run of points where the strategy fits.
      let run = [];
      const flush = () => {
        if (run.length > 1) {
          element("polyline", { points: run.join(" "), fill: "none", stroke: colour,
                                "stroke-width": s.name === "osdp" ? 3.5 : 1.6,
                                "stroke-dasharray": index > 6 && s.name !== "osdp" ? "4 3" : "none" }, group);
        }
        run = [];
      };
      s.throughput_samples_per_s.forEach((value, i) => {
        if (value === null) { flush(); return; }
        const x = sx(limits[i] / 1073741824), y = sy(value);
        run.push(`${x.toFixed(1)},${y.toFixed(1)}`);
        const dot = element("circle", { cx: x, cy: y, r: s.name === "osdp" ? 3.5 : 2.2, fill: colour }, group);
        element("title", {}, dot).textContent = `${s.name} at ${bytes(limits[i])}: ${value.toFixed(1)} samples/s`;
      });
      flush();
      const item = html("span");
      const swatch = html("i");
      swatch.style.background = colour;
      item.append(swatch, document.createTextNode(s.name));
      item.addEventListener("click", () => {
        const hidden = group.style.display === "none";
        group.style.display = hidden ? "" : "none";
        item.classList.toggle("off", !hidden);
      });
      legendBox.appendChild(item);
    });
    document.getElementById("throughput-plot").appendChild(picture);
  }

  function drawTimeline(data) {
    const timeline = data.timeline;
    if (!timeline) {
      document.getElementById("timeline-lesson").textContent =
        "This report was written without a simulation (osdp report --no-timeline, or a build " +
        "without SimGrid): no timeline.";
      return;
    }
    const laneIds = Object.keys(timeline.lanes).map(Number).sort((a, b) => a - b);
    const end = Math.max(timeline.iteration_time_s * 1e6,
                         ...timeline.spans.map((s) => s[2] + s[3]));
    const left = 110, width = 1030, laneHeight = 26;
    const picture = svg(left + width + 10, laneIds.length * (laneHeight + 8) + 34);
    picture.id = "timeline-svg";
    const sx = (us) => left + (us / end) * width;
    laneIds.forEach((lane, row) => {
      const y = row * (laneHeight + 8);
      text(picture, 0, y + 17, timeline.lanes[String(lane)]);
      element("rect", { x: left, y: y, width: width, height: laneHeight, fill: "#f5f7f9" }, picture);
    });
    const rowOf = new Map(laneIds.map((lane, row) => [lane, row]));
    const used = new Set();
    for (const [lane, category, start, duration, name] of timeline.spans) {
      const y = rowOf.get(lane) * (laneHeight + 8);
      used.add(category);
      const rect = element("rect", { class: "span", x: sx(start), y: y + 2,
                                     width: Math.max(0.4, (duration / end) * width),
                                     height: laneHeight - 4, fill: CATEGORY_COLOURS[category] || "#999" }, picture);
      element("title", {}, rect).textContent = `${name}: ${seconds(duration / 1e6)} from ${seconds(start / 1e6)}`;
    }
    const axisY = laneIds.length * (laneHeight + 8) + 14;
    for (const value of ticks(end / 1e3, 10)) {
      text(picture, sx(value * 1e3), axisY, `${value} ms`, { "text-anchor": "middle", "font-size": 11 });
    }
    document.getElementById("timeline-plot").appendChild(picture);
    legend(document.getElementById("timeline-legend"),
           [...used].map((category) => [category.replace(/_/g, " "), CATEGORY_COLOURS[category] || "#999"]));
    document.getElementById("timeline-lesson").textContent +=
      ` This iteration takes ${seconds(timeline.iteration_time_s)} in simulation ` +
      `(${seconds(timeline.compute_s)} of compute, ${seconds(timeline.exposed_communication_s)} ` +
      `of exposed communication); the peak, ${bytes(timeline.peak_memory_bytes)}, comes at ` +
      `${seconds(timeline.peak_time_s)}, reached by ${timeline.peak_memory_cause}.`;

    // Memory over time, stacked by category (a step function: each sample holds until the next).
    const categories = timeline.memory_categories;
    const points = timeline.memory;
    if (points.length === 0) return;
    const height = 200, top = 8;
    const memoryMax = Math.max(data.memory_limit_bytes,
                               ...points.map((p) => p.slice(1).reduce((a, b) => a + b, 0))) * 1.05;
    const memory = svg(left + width + 10, height + top + 30);
    memory.id = "memory-timeline-svg";
    const sy = (value) => top + height - (value / memoryMax) * height;
    for (const value of ticks(memoryMax / 1073741824, 5)) {
      element("line", { x1: left, x2: left + width, y1: sy(value * 1073741824), y2: sy(value * 1073741824), stroke: "#eef1f4" }, memory);
      text(memory, left - 6, sy(value * 1073741824) + 4, `${value} GiB`, { "text-anchor": "end", "font-size": 11 });
    }
    const below = points.map(() => 0);
    categories.forEach((category, c) => {
      const upper = [];
      const lower = [];
      points.forEach((p, i) => {
        const next = i + 1 < points.length ? points[i + 1][0] : end;
        const base = below[i];
        const top = base + p[c + 1];
        upper.push(`${sx(p[0]).toFixed(1)},${sy(top).toFixed(1)}`, `${sx(next).toFixed(1)},${sy(top).toFixed(1)}`);
        lower.push(`${sx(p[0]).toFixed(1)},${sy(base).toFixed(1)}`, `${sx(next).toFixed(1)},${sy(base).toFixed(1)}`);
        below[i] = top;
      });
      element("polygon", { class: "memory-area", points: upper.concat(lower.reverse()).join(" "),
                           fill: MEMORY_COLOURS[category] || "#999", "fill-opacity": 0.85 }, memory);
    });
    const limitY = sy(data.memory_limit_bytes);
    element("line", { x1: left, x2: left + width, y1: limitY, y2: limitY, stroke: "#1d232b", "stroke-dasharray": "5 4" }, memory);
    text(memory, left + width - 4, limitY - 4, `limit ${bytes(data.memory_limit_bytes)}`, { "text-anchor": "end", "font-size": 11 });
    const peakX = sx(timeline.peak_time_s * 1e6);
    element("circle", { cx: peakX, cy: sy(timeline.peak_memory_bytes), r: 4, fill: "#1d232b" }, memory);
    text(memory, peakX + 6, sy(timeline.peak_memory_bytes) - 6, `peak ${bytes(timeline.peak_memory_bytes)}`, { "font-size": 11 });
    document.getElementById("memory-timeline-plot").appendChild(memory);
    legend(document.getElementById("memory-timeline-legend"),
           categories.map((category) => [category.replace(/_/g, " "), MEMORY_COLOURS[category] || "#999"]));
  }

  function layoutModes(plan) {
    const zdp = plan.zdp_layers_per_stage.reduce((a, b) => a + b, 0);
    return zdp > 0 ? `${plan.base_mode} + ${zdp} zdp layers` : plan.base_mode;
  }
  function layoutSchedule(plan) {
    if (plan.pipeline_parallelism === 1) return "-";
    return plan.schedule === "interleaved" ? `interleaved v=${plan.chunks_per_stage}` : plan.schedule;
  }

  function drawLayouts(data) {
    const section = document.getElementById("layouts-section");
    const layouts = data.layouts;
    if (!layouts) {
      section.style.display = "none";  // an operator list: no layers to split
      return;
    }
    const table = html("table", undefined, { id: "layouts" });
    const head = html("tr");
    for (const title of ["strategy", "tp x pp x dp", "schedule", "micro-batch x m", "ckpt",
                         "data-parallel modes", "throughput", "iteration", "peak", "bubble"]) {
      head.appendChild(html("th", title));
    }
    table.appendChild(head);
    for (const plan of layouts.strategies) {
      const row = html("tr", undefined, plan.strategy === "3d_osdp" && plan.fits ? { class: "chosen" } : {});
      row.appendChild(html("td", plan.strategy));
      if (!plan.fits) {
        const cell = html("td", "does not fit", { colspan: 9, class: "oom" });
        row.appendChild(cell);
        table.appendChild(row);
        continue;
      }
      for (const value of [`${plan.tensor_parallelism} x ${plan.pipeline_parallelism} x ${plan.data_parallelism}`,
                           layoutSchedule(plan), `${plan.micro_batch} x ${plan.micro_batches}`,
                           plan.checkpoint ? "yes" : "no", layoutModes(plan),
                           `${plan.throughput_samples_per_s.toFixed(1)} samples/s`,
                           seconds(plan.iteration_time_s), bytes(plan.peak_memory_bytes),
                           `${(100 * plan.bubble_fraction).toFixed(1)} %`]) {
        row.appendChild(html("td", value));
      }
      table.appendChild(row);
    }
    document.getElementById("layouts-table").appendChild(table);
    const lesson = document.getElementById("layouts-lesson");
    const best = layouts.strategies[0];
    if (!best.fits) {
      lesson.textContent += ` No layout fits in ${bytes(data.memory_limit_bytes)}: the least ` +
        `any needs is ${bytes(layouts.least_memory_needed_bytes)}.`;
      return;
    }
    const planRate = data.plan.throughput_samples_per_s;
    const ratio = best.throughput_samples_per_s / planRate;
    lesson.textContent += ` Here the best layout, tp x pp x dp = ${best.tensor_parallelism} x ` +
      `${best.pipeline_parallelism} x ${best.data_parallelism}, trains ` +
      `${best.throughput_samples_per_s.toFixed(1)} samples/s against the data-parallel plan's ` +
      `${planRate.toFixed(1)} (${ratio >= 1 ? "+" : ""}${(100 * (ratio - 1)).toFixed(1)} %, ` +
      `the 3D model's figure beside the per-operator search's).`;

    // Each stage's peak: model states + activations in flight + the largest transient buffer.
    const stages = layouts.stages;
    const limit = data.memory_limit_bytes;
    const parts = [["model_state_bytes", "model states", "#4e79a7"],
                   ["activation_bytes", "activations in flight", "#f28e2b"],
                   ["transient_bytes", "transient", "#e15759"]];
    const max = Math.max(limit, ...stages.map((s) => s.peak_memory_bytes)) * 1.05;
    const left = 110, width = 1000, barHeight = 18, gap = 6;
    const memory = svg(left + width + 130, stages.length * (barHeight + gap) + 30);
    memory.id = "layout-memory-svg";
    stages.forEach((stage, row) => {
      const y = row * (barHeight + gap);
      text(memory, 0, y + 13, `stage ${row} (${stage.layers} layers)`, { "font-size": 11 });
      let x = left;
      for (const [key, label, colour] of parts) {
        const w = (stage[key] / max) * width;
        if (w <= 0) continue;
        const rect = element("rect", { class: "stage-memory", x: x, y: y, width: w, height: barHeight, fill: colour }, memory);
        element("title", {}, rect).textContent = `stage ${row}: ${label} ${bytes(stage[key])}` +
          (key === "activation_bytes" ? ` (${stage.micro_batches_in_flight} micro-batches)` : "");
        x += w;
      }
      text(memory, x + 6, y + 13, bytes(stage.peak_memory_bytes), { "font-size": 11 });
    });
    const limitX = left + (limit / max) * width;
    element("line", { x1: limitX, x2: limitX, y1: 0, y2: stages.length * (barHeight + gap),
                      stroke: "#1d232b", "stroke-dasharray": "5 4" }, memory);
    text(memory, limitX + 4, stages.length * (barHeight + gap) + 14, `limit ${bytes(limit)}`, { "font-size": 11 });
    document.getElementById("layout-memory").appendChild(memory);
    legend(document.getElementById("layout-memory-legend"), parts.map(([, label, colour]) => [label, colour]));

    // The pipeline: each stage's passes, then its gradient reductions.
    const plot = document.getElementById("pipeline-plot");
    if (!layouts.passes) {
      plot.appendChild(html("p", `The timeline has ${layouts.timeline_left_out} passes, more ` +
                                 "than this page draws (osdp layout --trace writes it).", { class: "lesson" }));
      return;
    }
    const end = Math.max(layouts.iteration_time_s,
                         ...stages.map((s) => s.finish_s + s.gradient_reduce_s));
    const laneHeight = 18;
    const picture = svg(left + width + 10, stages.length * (laneHeight + 6) + 30);
    picture.id = "pipeline-svg";
    const sx = (t) => left + (t / end) * width;
    const colours = { forward: "#4e79a7", backward: "#59a14f", reductions: "#79706e" };
    stages.forEach((stage, row) => {
      const y = row * (laneHeight + 6);
      text(picture, 0, y + 13, `stage ${row}`, { "font-size": 11 });
      element("rect", { x: left, y: y, width: width, height: laneHeight, fill: "#f5f7f9" }, picture);
      if (stage.gradient_reduce_s > 0) {
        const rect = element("rect", { class: "reduction", x: sx(stage.finish_s), y: y + 2,
                                       width: Math.max(0.5, sx(stage.finish_s + stage.gradient_reduce_s) - sx(stage.finish_s)),
                                       height: laneHeight - 4, fill: colours.reductions }, picture);
        element("title", {}, rect).textContent = `stage ${row}: gradient reductions ${seconds(stage.gradient_reduce_s)}`;
      }
    });
    for (const [stage, chunk, micro, pass, start, finish] of layouts.passes) {
      const y = stage * (laneHeight + 6);
      const kind = pass === 0 ? "forward" : "backward";
      const rect = element("rect", { class: "pass", x: sx(start), y: y + 2,
                                     width: Math.max(0.4, sx(finish) - sx(start) - 0.3),
                                     height: laneHeight - 4, fill: colours[kind] }, picture);
      element("title", {}, rect).textContent =
        `stage ${stage}: ${kind} of micro-batch ${micro} (chunk ${chunk}), ${seconds(finish - start)}`;
    }
    const axisY = stages.length * (laneHeight + 6) + 14;
    for (const value of ticks(end * 1e3, 10)) {
      text(picture, sx(value / 1e3), axisY, `${value} ms`, { "text-anchor": "middle", "font-size": 11 });
    }
    plot.appendChild(picture);
    legend(document.getElementById("pipeline-legend"),
           [["forward", colours.forward], ["backward", colours.backward],
            ["gradient reductions", colours.reductions]]);
  }

  function drawWhy(data) {
    const container = document.getElementById("why");
    for (const group of data.operator_classes) {
      const block = html("div", undefined, { class: "class" });
      const names = group.operators.length === 1 ? group.operators[0]
        : `${group.operators[0]} .. ${group.operators[group.operators.length - 1]} (${group.operators.length} identical operators)`;
      block.appendChild(html("h3", `${names} [${group.kind}]`));
      block.appendChild(html("p", `${(group.parameters / 1e6).toFixed(2)} M parameters, model states ` +
                                  `${bytes(group.model_state_bytes)} replicated; plan: ${group.plan}`));
      const table = html("table");
      const head = html("tr");
      for (const title of ["choice", "model states", "activations", "transient", "time", "compute",
                           "communication", "collectives per iteration"]) head.appendChild(html("th", title));
      table.appendChild(head);
      for (const option of group.options) {
        const row = html("tr", undefined, option.chosen ? { class: "chosen" } : {});
        const collectives = option.collectives.length === 0 ? "none"
          : option.collectives.map((c) => `${c.count > 1 ? c.count + " x " : ""}${c.collective} ${bytes(c.full_bytes)}`).join(" + ");
        for (const value of [option.choice + (option.chosen ? "  (plan)" : ""), bytes(option.model_state_bytes),
                             bytes(option.activation_bytes), bytes(option.transient_bytes), seconds(option.time_s),
                             seconds(option.compute_s), seconds(option.communication_s), collectives]) {
          row.appendChild(html("td", value));
        }
        table.appendChild(row);
      }
      block.appendChild(table);
      for (const reason of group.why || []) {
        const note = html("p", undefined, { class: "why" });
        note.append(html("b", `${reason.choice}: `), document.createTextNode(reason.why));
        block.appendChild(note);
      }
      container.appendChild(block);
    }
  }

  try {
    const data = JSON.parse(document.getElementById("report-data").textContent);
    drawSummary(data);
    drawPlanMap(data);
    drawMemoryBars(data);
    drawThroughput(data);
    drawTimeline(data);
    drawLayouts(data);
    drawWhy(data);
  } catch (error) {
    recordError(`${error.name}: ${error.message}`);
    throw error;
  }
  document.body.dataset.rendered = errors.length === 0 ? "yes" : "with-errors";
})();
