// The compare chart: each run's curve downsampled by the server (a min and a max per slice
// of the x axis, a slice about a pixel column wide), or one mean line and a mean ± std band
// per group. The page's head asks for the curves (a preload link) while the page and Plotly
// load; this takes that answer and draws once both are there. Log scale and smoothing
// (static/js/chart-scale.js, the job page's) redraw in place and are kept in the URL. Runs
// the server left out are listed with why (#compare-left-out): the chart never drops one
// silently.
(function () {
  "use strict";
  const el = document.getElementById("compare-chart");
  const note = document.getElementById("compare-note");
  const rangeNote = document.getElementById("compare-range");
  const leftOut = document.getElementById("compare-left-out");
  const logBox = document.getElementById("compare-log");
  const smoothInput = document.getElementById("compare-smooth");
  const smoothValue = document.getElementById("compare-smooth-value");
  const form = document.getElementById("compare-form");
  const field = (name) => form.querySelector(`[name=${name}]`);
  const MARGIN = { t: 20, r: 20, b: 90, l: 70 };
  // The same URL and mode as the preload, so that the browser hands its answer over.
  const curvesUrl = document.getElementById("compare-curves").href;
  const params = new URL(curvesUrl).searchParams;
  const curves = fetch(curvesUrl, { credentials: "same-origin" }).then((response) => {
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    return response.json();
  });
  // Plotly reads a few HTML tags in trace names; a setting's value is the job's own text.
  const plain = (text) => String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  // A count with thousands' commas, as the page's English reads. Not toLocaleString: its
  // first call loads the locale's data, 20-30 ms before the chart's first draw.
  const count = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  const plural = (n, word) => `${count(n)} ${word}${n === 1 ? "" : "s"}`;
  const COLORS = ["#2457d6", "#b42318", "#15803d", "#a16207", "#7c3aed", "#0e7490", "#be185d", "#4b5563"];

  // The server's x: steps, seconds since the run's start, or Unix seconds; drawn as steps,
  // minutes or hours, or dates.
  function xAxis(data) {
    const axisTitle = field("axis").selectedOptions[0].textContent;
    if (data.axis === "wall") {
      return { scale: (x) => x.map((s) => new Date(s * 1000)), layout: { type: "date", title: { text: `${axisTitle} (your time zone)` } } };
    }
    if (data.axis === "elapsed") {
      const top = Math.max(0, ...data.runs.map((run) => (run.x.length ? run.x[run.x.length - 1] : 0)));
      const [unit, per] = top > 7200 ? ["hours", 3600] : ["minutes", 60];
      return { scale: (x) => x.map((s) => s / per), layout: { title: { text: `${axisTitle} (${unit})` } } };
    }
    return { scale: (x) => x, layout: { title: { text: axisTitle } } };
  }

  function traces(data, xaxis, alpha) {
    const smooth = (ys) => ChartScale.smoothed(ys, alpha);
    const out = [];
    if (data.groups) {
      data.groups.forEach((group, i) => {
        const color = COLORS[i % COLORS.length];
        const x = xaxis.scale(group.x);
        // By the runs' own groups ("@group") the label is the group's name; by a setting, key=value.
        const by = params.get("group") === "@group" ? "" : `${params.get("group")}=`;
        const name = plain(`${by}${group.label} (${plural(group.runs.length, "run")})`);
        out.push({ type: "scatter", mode: "lines", x, y: smooth(group.hi), line: { width: 0, color }, showlegend: false, hoverinfo: "skip" });
        out.push({ type: "scatter", mode: "lines", x, y: smooth(group.lo), line: { width: 0, color }, fill: "tonexty", fillcolor: color + "33", showlegend: false, hoverinfo: "skip" });
        out.push({ type: "scatter", mode: "lines", name, x, y: smooth(group.mean), line: { color, width: 2 } });
      });
      return out;
    }
    data.runs.forEach((run, i) => {
      out.push({
        type: "scatter", mode: "lines", name: plain(`${run.name} #${run.id}`), x: xaxis.scale(run.x), y: smooth(run.y),
        connectgaps: false, line: { color: COLORS[i % COLORS.length], width: 1.5 },
      });
    });
    return out;
  }

  // Linear: fitted to the runs that are not orders of magnitude off (the server's y_range),
  // saying which are; log: every run whole, Plotly's own range.
  function yAxis(data) {
    const title = data.groups ? `${data.y_title}, mean ± 1 std` : data.y_title;
    const axis = { title: { text: plain(title) }, exponentformat: "e" };
    rangeNote.hidden = true;
    if (logBox.checked) return ChartScale.yAxis(axis, true);
    if (data.y_range) {
      const off = data.y_range.off.map((run) => `${run.name} #${run.id} reaches ${Number(run.value).toPrecision(3)}`);
      rangeNote.textContent = `The y axis is fitted to the other runs: ${off.join("; ")}, off the chart. Tick log scale to see every run whole.`;
      rangeNote.hidden = false;
      return { ...axis, range: data.y_range.range, autorange: false };
    }
    return axis;
  }

  function showLeftOut(data, asked) {
    leftOut.replaceChildren();
    if (!data.left_out.length) { leftOut.hidden = true; return; }
    const head = document.createElement("p");
    head.textContent = `Left out of the chart: ${data.left_out.length} of ${plural(asked, "run")} asked for.`;
    const list = document.createElement("ul");
    for (const run of data.left_out) {
      const item = document.createElement("li");
      item.dataset.run = run.id;
      item.dataset.why = run.why;
      item.textContent = run.text;
      list.append(item);
    }
    leftOut.append(head, list);
    leftOut.hidden = false;
  }

  function keep(name, value) {
    const url = new URL(window.location.href);
    if (value) url.searchParams.set(name, value);
    else url.searchParams.delete(name);
    window.history.replaceState(null, "", url);
  }

  function draw(data) {
    const asked = new Set(params.get("runs").split(",").filter(Boolean)).size;
    const xaxis = xAxis(data);
    const points = data.runs.reduce((sum, run) => sum + run.total, 0);
    const shown = data.runs.reduce((sum, run) => sum + run.x.length, 0);
    note.textContent = `${plural(data.runs.length, "run")} drawn, ${count(points)} points, ${count(shown)} drawn (the minimum and maximum of each of ${plural(Number(params.get("width")), "slice")} of the x axis).`;
    const gaps = data.runs.reduce((sum, run) => sum + run.nonfinite.length, 0);
    if (data.groups) note.textContent += " Each group: its runs' mean as a line, mean ± 1 standard deviation as the band.";
    if (gaps) note.textContent += ` ${plural(gaps, "NaN or infinite value")} shown as gaps.`;
    showLeftOut(data, asked);
    const layout = () => ({
      margin: MARGIN,
      xaxis: xaxis.layout,
      yaxis: yAxis(data),
      legend: { orientation: "h", y: -0.32 },
    });
    const render = () => {
      const alpha = ChartScale.alphaOf(smoothInput);
      smoothValue.textContent = alpha ? alpha.toFixed(2) : "off";
      Plotly.react(el, traces(data, xaxis, alpha), layout(), { displayModeBar: false, responsive: true });
    };
    render();
    logBox.addEventListener("change", () => { keep("log", logBox.checked ? "1" : ""); render(); });
    smoothInput.addEventListener("input", () => { keep("smooth", ChartScale.alphaOf(smoothInput) ? smoothInput.value : ""); render(); });
  }

  const plotly = new Promise((resolve) => {
    if (window.Plotly) resolve();
    else window.addEventListener("DOMContentLoaded", resolve, { once: true });
  });
  Promise.all([curves, plotly])
    .then(([data]) => draw(data))
    .catch((error) => {
      note.textContent = `The curves could not be loaded: ${error.message}.`;
    });
})();
