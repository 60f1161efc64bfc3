// The cluster page's recent waits: each started job's wait (minutes) by when it was
// submitted, one trace per partition, from the page's #waits-data.
(function () {
  "use strict";
  const el = document.getElementById("chart-waits");
  const source = document.getElementById("waits-data");
  if (!window.Plotly || !el || !source) return;
  const data = JSON.parse(source.textContent);
  const traces = data.partitions.map((p) => ({
    type: "scatter",
    mode: "markers",
    name: p.name,
    x: p.x,
    y: p.y,
    marker: { size: 6, opacity: 0.8 },
    hovertemplate: "%{y:.1f} min wait<br>submitted %{x}<extra>" + p.name + "</extra>",
  }));
  const layout = {
    margin: { t: 30, r: 20, b: 40, l: 55 },
    title: { text: "Wait per job (submitted to started)", font: { size: 14 } },
    xaxis: { title: { text: "submitted" }, type: "date" },
    yaxis: { title: { text: "wait (minutes)" }, rangemode: "tozero" },
    legend: { orientation: "h", y: -0.25 },
    showlegend: data.partitions.length > 1,
  };
  PlotFrame.draw(el, traces, layout, { displayModeBar: false });
})();
