// The sweep page's parallel coordinates: one line per trial, coloured by the metric.
(function () {
  "use strict";
  const node = document.getElementById("sweep-chart-data");
  const div = document.getElementById("sweep-parcoords");
  if (!node || !div || typeof Plotly === "undefined") return;
  const data = JSON.parse(node.textContent);
  if (!data.trials.length) {
    div.textContent = "No trial has a value yet.";
    return;
  }
  const dimensions = data.dimensions.map((d) => {
    const dim = { label: d.label, values: d.values };
    if (d.tickvals) {
      dim.tickvals = d.tickvals;
      dim.ticktext = d.ticktext;
    }
    return dim;
  });
  Plotly.newPlot(
    div,
    [{
      type: "parcoords",
      line: {
        color: data.color,
        colorscale: "Viridis",
        reversescale: data.reversescale,
        showscale: true,
      },
      dimensions: dimensions,
    }],
    { margin: { l: 70, r: 70, t: 50, b: 30 }, height: 400 },
    { displaylogo: false, responsive: true },
  ).then(() => div.setAttribute("data-ready", "1"));
})();
