// The job page's charts: every attempt's points, drawn as one run by step.
// Points are kept per attempt and series (a Map from x to y, so a point read twice,
// over REST and in a delta, is one point). A series' curve takes each attempt's points
// below the first step of the next attempt: resumed steps overwrite, never duplicate.
// A vertical marker shows where each later attempt began. GPU samples (by time) are
// shown for the current attempt only. Names are data, never markup: they are escaped
// before Plotly sees them. A non-finite value (y null, or an x in the series' `nonfinite`)
// is a gap: the curve breaks there, never joins across it, and a marker names the step.
(function () {
  "use strict";
  const PALETTE = ["#2457d6", "#d9480f", "#2b8a3e", "#ae3ec9", "#e8590c", "#0c8599",
    "#c2255c", "#5c940d", "#1864ab", "#862e9c", "#a61e4d", "#364fc7"];
  // Chart element by series kind (kinds come from the server: monitoring/job_page/facts.py).
  const CHART_OF_KIND = {
    loss: "chart-loss", token_rate: "chart-rate", sample_rate: "chart-rate", step_rate: "chart-rate",
    total: "chart-total", mfu: "chart-mfu", pace: "chart-pace", step_time: "chart-step_time", other: "chart-other",
    // Each on its own axis: a learning rate or gradient norm beside the loss flattens it.
    learning_rate: "chart-learning_rate", grad_norm: "chart-grad_norm",
    eval_loss: "chart-eval_loss", eval: "chart-eval",
  };
  const RATE_CHARTS = new Set(["chart-rate", "chart-total"]); // 128k tokens/s, not 1.28e+5
  const UNIT_OF_KIND = { token_rate: "tokens/s", sample_rate: "samples/s", step_rate: "steps/s" };
  const GPU_TITLES = {
    utilization: "Utilisation (%)", memory_used: "Memory used (GiB)",
    temperature: "Temperature (°C)", power: "Power (W)",
  };
  // Each chart's y axis: its unit, or what its numbers are where they have none.
  const GPU_UNITS = { utilization: "%", memory_used: "GiB", temperature: "°C", power: "W" };
  const GPU_SCALE = { memory_used: 1 / 1024 }; // nvidia-smi gives MiB
  const Y_TITLES = {
    "chart-loss": "loss", "chart-pace": "steps/s", "chart-step_time": "s per step",
    "chart-learning_rate": "learning rate", "chart-grad_norm": "gradient norm",
    "chart-eval_loss": "loss", "chart-eval": "value", "chart-other": "value",
  };

  function esc(text) {
    return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  }

  function hash(text) {
    let h = 2166136261;
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
    return h >>> 0;
  }

  window.JobCharts = function (options) {
    const gpuPattern = new RegExp(options.formats.gpuSeriesPattern);
    const store = {}; // name -> attempt number -> Map(x -> y)
    const kinds = {}; // name -> kind
    const sources = {}; // name -> where a trainer's own record file gave it ("from metrics.csv")
    const colours = {}; // chart id -> {name: colour}
    const dirty = new Set();
    let mfuTerms = options.mfu;
    let current = options.attempt; // the attempt whose GPU samples are shown
    let timer = null;

    const gpuParts = (name) => {
      const parts = gpuPattern.exec(name);
      return parts ? { node: parts[1], index: parts[2], metric: parts[3] } : null;
    };
    const kindOf = (name) => (gpuParts(name) ? "gpu" : kinds[name]);
    const chartOf = (name) => {
      const gpu = gpuParts(name);
      return gpu ? `chart-${gpu.metric}` : CHART_OF_KIND[kinds[name]];
    };

    function colourFor(chart, name) {
      const used = (colours[chart] = colours[chart] || {});
      if (!used[name]) {
        const taken = new Set(Object.values(used));
        let i = hash(name) % PALETTE.length;
        for (let n = 0; n < PALETTE.length && taken.has(PALETTE[i]); n++) i = (i + 1) % PALETTE.length;
        used[name] = PALETTE[i];
      }
      return used[name];
    }

    function put(attempt, name, xs, ys, nonfinite) {
      const byAttempt = (store[name] = store[name] || {});
      const points = (byAttempt[attempt] = byAttempt[attempt] || new Map());
      for (let i = 0; i < xs.length; i++) points.set(xs[i], Number.isFinite(ys[i]) ? ys[i] : null);
      for (const x of nonfinite || []) points.set(x, null);
      const chart = chartOf(name);
      if (chart) schedule(chart);
      if (!gpuParts(name)) schedule("chart-loss"); // attempt markers may move on every step chart
    }

    function sorted(points, below) {
      return Array.from(points).filter(([x]) => x < below).sort((a, b) => a[0] - b[0]);
    }

    // One curve across attempts: later attempts win from their first step on.
    function joined(name) {
      const byAttempt = store[name] || {};
      const numbers = Object.keys(byAttempt).map(Number).sort((a, b) => b - a);
      let cutoff = Infinity;
      const pieces = [];
      for (const n of numbers) {
        const points = byAttempt[n];
        if (!points.size) continue;
        pieces.unshift(sorted(points, cutoff));
        cutoff = Math.min(cutoff, Math.min(...points.keys()));
      }
      return pieces.flat();
    }

    // Where each attempt began: its lowest step in any step series.
    function attemptStartsAll() {
      const starts = {};
      for (const [name, byAttempt] of Object.entries(store)) {
        if (gpuParts(name) || !kinds[name]) continue;
        for (const [n, points] of Object.entries(byAttempt)) {
          if (!points.size) continue;
          const low = Math.min(...points.keys());
          starts[n] = n in starts ? Math.min(starts[n], low) : low;
        }
      }
      return starts;
    }

    // Markers: where each attempt after the first drawn one began.
    function attemptStarts() {
      const starts = attemptStartsAll();
      const first = Math.min(...Object.keys(starts).map(Number));
      return Object.entries(starts).map(([n, x]) => ({ attempt: Number(n), x })).filter((s) => s.attempt > first);
    }

    function titleOf(chart) {
      if (chart === "chart-mfu") {
        if (mfuTerms && mfuTerms.source === "computed") {
          return `MFU (%) of ${mfuTerms.gpus} × ${mfuTerms.peak_tflops} TFLOP/s peak`;
        }
        return "MFU (as the trainer prints it)";
      }
      return {
        "chart-loss": "Loss", "chart-rate": "Throughput", "chart-total": "Running totals",
        "chart-pace": "Pace per node (steps/s)", "chart-step_time": "Step time", "chart-other": "Other metrics",
        "chart-learning_rate": "Learning rate", "chart-grad_norm": "Gradient norm",
        "chart-eval_loss": "Evaluation loss", "chart-eval": "Evaluation metrics",
      }[chart] || GPU_TITLES[chart.replace("chart-", "")] || "";
    }

    const gapMarks = {}; // chart id -> [{x, name, colour}] of the last draw

    function stepTraces(chart) {
      gapMarks[chart] = [];
      const names = Object.keys(store).filter((n) => !gpuParts(n) && chartOf(n) === chart).sort();
      const units = [];
      const traces = [];
      for (const name of names) {
        const points = joined(name);
        if (!points.length) continue;
        const kind = kindOf(name);
        let axis = "y";
        if (chart === "chart-rate" || chart === "chart-total") {
          // A unit per axis: tokens and samples never share one.
          const unit = chart === "chart-rate" ? UNIT_OF_KIND[kind] : (/token/.test(name) ? "tokens" : "samples");
          if (!units.includes(unit)) units.push(unit);
          const i = units.indexOf(unit);
          axis = i ? `y${i + 1}` : "y";
        }
        const scale = name === "mfu_computed" ? 100 : 1; // the portal's MFU is a fraction; a printed one as printed
        let ys = points.map((p) => (p[1] === null ? null : p[1] * scale));
        if (chart === "chart-loss") ys = ChartScale.smoothed(ys, ChartScale.alphaOf(document.getElementById("loss-smooth")));
        const colour = colourFor(chart, name);
        traces.push({
          type: "scatter", mode: points.length < 40 ? "lines+markers" : "lines",
          x: points.map((p) => p[0]), y: ys, name: esc(sources[name] ? `${name} (${sources[name]})` : name),
          yaxis: axis, connectgaps: false,
          line: { color: colour, width: 1.6 }, marker: { size: 4 },
          hovertemplate: `step %{x}: %{y:${RATE_CHARTS.has(chart) ? ".4~s" : ".4~g"}} ${esc(unitOf(name, units, axis))}<extra>%{fullData.name}</extra>`,
        });
        const gaps = points.filter((p) => p[1] === null).map((p) => p[0]);
        if (gaps.length) gapMarks[chart].push(...gaps.map((x) => ({ x, name, colour })));
      }
      if (chart === "chart-pace" && traces.length < 2) return { traces: [], units }; // one node: no comparison
      return { traces, units };
    }

    function gpuTraces(chart) {
      const names = Object.keys(store).filter((n) => gpuParts(n) && chartOf(n) === chart).sort();
      return names.map((name) => {
        const points = sorted(store[name][current] || new Map(), Infinity);
        const gpu = gpuParts(name);
        const scale = GPU_SCALE[gpu.metric] || 1;
        return {
          type: "scatter", mode: "lines", name: esc(`${gpu.node} GPU ${gpu.index}`),
          x: points.map((p) => new Date(p[0] * 1000)), y: points.map((p) => p[1] * scale),
          hovertemplate: `%{x|%H:%M:%S}: %{y:.3~f} ${GPU_UNITS[gpu.metric] || ""}<extra>%{fullData.name}</extra>`,
          line: { color: colourFor(chart, `${gpu.node}/${gpu.index}`), width: 1.4 },
        };
      }).filter((t) => t.x.length);
    }

    // The unit of a trace's values in its hover: its axis's (tokens/s), % for the portal's MFU.
    function unitOf(name, units, axis) {
      if (name === "mfu_computed") return "%";
      return units[axis === "y" ? 0 : Number(axis.slice(1)) - 1] || "";
    }

    function yTitleOf(chart, units) {
      if (chart === "chart-mfu") return mfuTerms && mfuTerms.source === "computed" ? "%" : "as printed";
      return units[0] || Y_TITLES[chart] || "";
    }

    function layoutFor(chart, units, time) {
      const title = titleOf(chart);
      const metric = chart.replace("chart-", "");
      const yTitle = time ? GPU_UNITS[metric] || "" : yTitleOf(chart, units);
      const records = (document.getElementById("num-step") || { dataset: {} }).dataset.x === "records";
      const xTitle = time ? "time" : records ? "record" : "step";
      const layout = {
        margin: { t: 30, r: units.length > 1 ? 60 : 15, b: 30, l: 55 },
        title: { text: esc(title), font: { size: 13 } },
        xaxis: { title: { text: xTitle }, domain: [0, units.length > 2 ? 0.86 : 1] },
        legend: { orientation: "h", y: -0.22, yanchor: "top" }, showlegend: true,
        yaxis: ChartScale.yAxis({ title: { text: esc(yTitle) } }, chart === "chart-loss" && document.getElementById("loss-log").checked),
      };
      if (units[1]) layout.yaxis2 = { title: { text: units[1] }, overlaying: "y", side: "right" };
      if (units[2]) layout.yaxis3 = { title: { text: units[2] }, overlaying: "y", side: "right", anchor: "free", position: 1 };
      if (!time) {
        const starts = attemptStarts();
        layout.shapes = starts.map((s) => ({
          type: "line", xref: "x", yref: "paper", x0: s.x, x1: s.x, y0: 0, y1: 1,
          line: { color: "#868e96", width: 1.2, dash: "dot" },
        }));
        layout.annotations = starts.map((s) => ({
          x: s.x, xref: "x", y: 1, yref: "paper", yanchor: "bottom", showarrow: false,
          text: `attempt ${s.attempt}`, font: { size: 11, color: "#495057" },
        }));
        // Non-finite values: a dashed line and "NaN at step 12" at each gap.
        for (const gap of gapMarks[chart] || []) {
          layout.shapes.push({
            type: "line", xref: "x", yref: "paper", x0: gap.x, x1: gap.x, y0: 0, y1: 1,
            line: { color: gap.colour, width: 1.2, dash: "dash" },
          });
          layout.annotations.push({
            x: gap.x, xref: "x", y: 0.02, yref: "paper", yanchor: "bottom", showarrow: false,
            text: esc(`NaN at step ${gap.x}`), hovertext: esc(gap.name), textangle: -90,
            xanchor: "right", font: { size: 11, color: gap.colour }, name: "nonfinite",
          });
        }
        // Opened from an alert (/jobs/<id>/?attempt=N&at=<x>): mark where it fired.
        const at = Number(new URLSearchParams(location.search).get("at"));
        if (new URLSearchParams(location.search).has("at") && Number.isFinite(at)) {
          layout.shapes.push({
            type: "line", xref: "x", yref: "paper", x0: at, x1: at, y0: 0, y1: 1,
            line: { color: "#c0392b", width: 1.5, dash: "dash" },
          });
          layout.annotations.push({
            x: at, xref: "x", y: 1, yref: "paper", yanchor: "bottom", showarrow: false,
            text: "alert", font: { size: 11, color: "#c0392b" },
          });
        }
      }
      return layout;
    }

    function draw(chart) {
      const el = document.getElementById(chart);
      if (!el) return;
      const time = !CHART_OF_KIND_VALUES.has(chart);
      const { traces, units } = time ? { traces: gpuTraces(chart), units: [] } : stepTraces(chart);
      if (!traces.length) {
        if (el.data) Plotly.purge(el);
        el.hidden = true;
      } else {
        el.hidden = false;
        el.closest("section").hidden = false;
        PlotFrame.draw(el, traces, layoutFor(chart, units, time));
      }
      document.querySelectorAll("#metrics-section, #gpu-section").forEach((section) => {
        section.hidden = !section.querySelector(".chart:not([hidden])");
      });
    }

    // A chart that appears or goes changes its neighbours' widths: fit them all again.
    let shown = "";
    function refit() {
      const visible = Array.from(document.querySelectorAll(".chart:not([hidden])")).filter((el) => el.data);
      const now = visible.map((el) => el.id).join();
      if (now === shown) return;
      shown = now;
      visible.forEach((el) => Plotly.Plots.resize(el));
    }
    const CHART_OF_KIND_VALUES = new Set(Object.values(CHART_OF_KIND));

    function schedule(chart) {
      dirty.add(chart);
      if (timer) return;
      timer = setTimeout(() => {
        timer = null;
        const charts = Array.from(dirty);
        dirty.clear();
        // Markers are on every step chart: redraw them all when a step chart changes.
        const all = charts.some((c) => CHART_OF_KIND_VALUES.has(c)) ? [...CHART_OF_KIND_VALUES, ...charts] : charts;
        new Set(all).forEach(draw);
        refit();
        if (options.onDraw) options.onDraw();
      }, 200);
    }

    function redrawAll() {
      Object.keys(store).forEach((n) => chartOf(n) && schedule(chartOf(n)));
      CHART_OF_KIND_VALUES.forEach(schedule);
    }

    return {
      esc,
      put,
      kindOf,
      setKinds(found) {
        let changed = false;
        for (const [name, kind] of Object.entries(found)) {
          if (kinds[name] !== kind) { kinds[name] = kind; changed = true; }
        }
        if (changed) redrawAll();
      },
      setSources(found) {
        let changed = false;
        for (const [name, source] of Object.entries(found)) {
          if (sources[name] !== source) { sources[name] = source; changed = true; }
        }
        if (changed) redrawAll();
      },
      knows: (name) => Boolean(gpuParts(name) || kinds[name]),
      setMfu(terms) { mfuTerms = terms; schedule("chart-mfu"); },
      setCurrent(n) { current = n; Object.keys(GPU_TITLES).forEach((m) => schedule(`chart-${m}`)); },
      redrawLoss() { schedule("chart-loss"); },
      // The last finite point of a series in one attempt (for the numbers), and its points.
      last(name, attempt) {
        const points = (store[name] || {})[attempt];
        if (!points || !points.size) return null;
        let best = null;
        for (const [x, y] of points) if (y !== null && (best === null || x >= best[0])) best = [x, y];
        return best;
      },
      names: () => Object.keys(store),
      firstStep(attempt) {
        const start = attemptStartsAll()[attempt];
        return start === undefined ? null : start;
      },
      drawnPoints(chart) {
        const el = document.getElementById(chart);
        return el && el.data ? el.data.reduce((n, t) => n + t.x.length, 0) : 0;
      },
    };
  };
})();
