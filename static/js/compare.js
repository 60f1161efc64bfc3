// The compare chart: each run's curve downsampled by the server to this chart's width
// (a min and a max per pixel column), or one mean line and a mean ± std band per group.
(function () {
  "use strict";
  const el = document.getElementById("compare-chart");
  const note = document.getElementById("compare-note");
  const rangeNote = document.getElementById("compare-range");
  const logBox = document.getElementById("compare-log");
  const curvesUrl = JSON.parse(document.getElementById("compare-curves-url").textContent);
  const here = new URLSearchParams(window.location.search);
  const form = document.getElementById("compare-form");
  const params = new URLSearchParams({
    runs: here.get("runs") || "",
    metric: form.querySelector("[name=metric]").value,
    group: form.querySelector("[name=group]").value,
    axis: form.querySelector("[name=axis]").value,
    width: String(Math.max(el.clientWidth, 300)),
  });
  // Plotly reads a few HTML tags in trace names; a setting's value is the job's own text.
  const plain = (text) => String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const COLORS = ["#2457d6", "#b42318", "#15803d", "#a16207", "#7c3aed", "#0e7490", "#be185d", "#4b5563"];
  // The server's x: steps, seconds since the run's start, or Unix seconds; drawn as steps,
  // minutes or hours, or dates.
  function xAxis(data) {
    const axisTitle = form.querySelector("[name=axis]").selectedOptions[0].textContent;
    if (data.axis === "wall") {
      return { scale: (x) => x.map((s) => new Date(s * 1000)), layout: { type: "date", title: { text: axisTitle } } };
    }
    if (data.axis === "elapsed") {
      const top = Math.max(0, ...data.runs.map((run) => (run.x.length ? run.x[run.x.length - 1] : 0)));
      const [unit, per] = top > 7200 ? ["hours", 3600] : ["minutes", 60];
      return { scale: (x) => x.map((s) => s / per), layout: { title: { text: `${axisTitle} (${unit})` } } };
    }
    return { scale: (x) => x, layout: { title: { text: axisTitle } } };
  }
  fetch(`${curvesUrl}?${params}`, { credentials: "same-origin" })
    .then((response) => {
      if (!response.ok) throw new Error(`the server answered ${response.status}`);
      return response.json();
    })
    .then((data) => {
      const xaxis = xAxis(data);
      const traces = [];
      if (data.groups) {
        data.groups.forEach((group, i) => {
          const color = COLORS[i % COLORS.length];
          // By the runs' own groups ("@group") the label is the group's name; by a setting, key=value.
          const by = params.get("group") === "@group" ? "" : `${params.get("group")}=`;
          const name = plain(`${by}${group.label} (${group.runs.length} run${group.runs.length === 1 ? "" : "s"})`);
          traces.push({ type: "scatter", mode: "lines", x: xaxis.scale(group.x), y: group.hi, line: { width: 0, color }, showlegend: false, hoverinfo: "skip" });
          traces.push({ type: "scatter", mode: "lines", x: xaxis.scale(group.x), y: group.lo, line: { width: 0, color }, fill: "tonexty", fillcolor: color + "33", showlegend: false, hoverinfo: "skip" });
          traces.push({ type: "scatter", mode: "lines", name, x: xaxis.scale(group.x), y: group.mean, line: { color, width: 2 } });
        });
      } else {
        data.runs.forEach((run, i) => {
          traces.push({ type: "scatter", mode: "lines", name: plain(`${run.name} #${run.id}`), x: xaxis.scale(run.x), y: run.y, line: { color: COLORS[i % COLORS.length], width: 1.5 } });
        });
      }
      const points = data.runs.reduce((sum, run) => sum + run.total, 0);
      const shown = data.runs.reduce((sum, run) => sum + run.x.length, 0);
      note.textContent = `${data.runs.length} runs, ${points.toLocaleString()} points, ${shown.toLocaleString()} drawn (each pixel column's minimum and maximum).`;
      const gaps = data.runs.reduce((sum, run) => sum + run.nonfinite.length, 0);
      if (data.groups) note.textContent += " Each group: its runs' mean as a line, mean ± 1 standard deviation as the band.";
      if (gaps) note.textContent += ` ${gaps.toLocaleString()} NaN or infinite value${gaps === 1 ? "" : "s"} shown as gaps.`;
      // Linear: fitted to the runs that are not orders of magnitude off (the server's
      // y_range), saying which are; log: every run whole, Plotly's own range.
      const yaxis = () => {
        const axis = { title: { text: plain(data.metric) }, exponentformat: "e" };
        rangeNote.hidden = true;
        if (logBox.checked) return { ...axis, type: "log" };
        if (data.y_range) {
          const off = data.y_range.off.map((run) => `${run.name} #${run.id} reaches ${Number(run.value).toPrecision(3)}`);
          rangeNote.textContent = `The y axis is fitted to the other runs: ${off.join("; ")}, off the chart. Tick log scale to see every run whole.`;
          rangeNote.hidden = false;
          return { ...axis, range: data.y_range.range, autorange: false };
        }
        return axis;
      };
      const layout = {
        margin: { t: 20, r: 20, b: 90, l: 60 },
        xaxis: xaxis.layout,
        yaxis: yaxis(),
        legend: { orientation: "h", y: -0.32 },
      };
      Plotly.newPlot(el, traces, layout, { displayModeBar: false, responsive: true });
      logBox.addEventListener("change", () => {
        const url = new URL(window.location.href);
        if (logBox.checked) url.searchParams.set("log", "1");
        else url.searchParams.delete("log");
        window.history.replaceState(null, "", url);
        Plotly.relayout(el, { yaxis: yaxis() });
      });
    })
    .catch((error) => {
      note.textContent = `The curves could not be loaded: ${error.message}.`;
    });
})();
