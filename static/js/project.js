// The project's burn-down: GPU-hours left of this period's budget against an even pace.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("usage-data").textContent);
  const el = document.getElementById("chart-usage");
  if (!window.Plotly || !el) return;
  const hasBudget = data.budget !== null;
  const traces = [];
  if (hasBudget) {
    traces.push(
      { type: "scatter", mode: "lines+markers", name: "GPU-h left", x: data.days, y: data.left, line: { color: "#2457d6", width: 3, shape: "hv" }, marker: { size: 4 } },
      { type: "scatter", mode: "lines", name: "even pace to the period's end", x: [data.periodStart, data.periodEnd], y: [data.budget, 0], line: { color: "#6b7280", dash: "dash" } },
      { type: "scatter", mode: "lines", name: `budget (${data.budget} GPU-h)`, x: [data.periodStart, data.periodEnd], y: [data.budget, data.budget], line: { color: "#b42318", dash: "dot" } },
    );
  } else {
    traces.push({ type: "scatter", mode: "lines+markers", name: "GPU-h used (no budget set)", x: data.days, y: data.used, line: { color: "#2457d6", width: 3, shape: "hv" } });
  }
  // Each day's bar spans that day (centred at noon), under the lines.
  const DAY_MS = 86400000;
  traces.unshift({ type: "bar", name: "used that day", x: data.days.slice(0, -1).map((d) => `${d} 12:00`), y: data.daily, width: 0.8 * DAY_MS, marker: { color: "#93c5fd" } });
  const layout = {
    margin: { t: 30, r: 20, b: 40, l: 55 },
    title: { text: hasBudget ? `GPU-hours left this period: ${data.leftNow} of ${data.budget}` : "GPU-hours used this period", font: { size: 14 } },
    xaxis: { title: { text: "day" }, range: [data.periodStart, data.periodEnd], type: "date" },
    yaxis: { title: { text: "GPU-hours" }, rangemode: "tozero" },
    legend: { orientation: "h", y: -0.25 },
    bargap: 0.2,
  };
  for (const trace of traces) trace.hovertemplate = "%{x|%Y-%m-%d}: %{y:.3~f} GPU-h<extra>%{fullData.name}</extra>";
  PlotFrame.draw(el, traces, layout, { displayModeBar: false });
})();
