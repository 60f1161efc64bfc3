// The project's GPU-hours per day, and the cumulative use against the budget.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("usage-data").textContent);
  const el = document.getElementById("chart-usage");
  if (!window.Plotly || !el) return;
  let total = 0;
  const cumulative = data.gpu_hours.map((v) => (total += v));
  const traces = [
    { type: "bar", name: "GPU-h per day", x: data.days, y: data.gpu_hours, marker: { color: "#2457d6" } },
    { type: "scatter", mode: "lines", name: "cumulative", x: data.days, y: cumulative, yaxis: "y2", line: { color: "#16a34a" } },
  ];
  const layout = {
    margin: { t: 10, r: 50, b: 40, l: 50 },
    yaxis: { title: "GPU-h", rangemode: "tozero" },
    yaxis2: { title: "cumulative", overlaying: "y", side: "right", rangemode: "tozero" },
    legend: { orientation: "h" },
    shapes: [],
  };
  if (data.budget !== null && data.days.length) {
    layout.shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, yref: "y2", y0: data.budget, y1: data.budget, line: { dash: "dot", color: "#b42318" } });
  }
  Plotly.newPlot(el, traces, layout, { displayModeBar: false, responsive: true });
})();
