// The sweep page's parallel coordinates: one line per trial, coloured by the metric.
(function () {
  "use strict";
  const node = document.getElementById("sweep-chart-data");
  const div = document.getElementById("sweep-parcoords");
  if (!node || !div || typeof Plotly === "undefined") return;
  const data = JSON.parse(node.textContent);
  const note = document.getElementById("sweep-diverged");
  if (note && data.diverged.length) {
    const which = data.diverged.join(", ");
    note.textContent = `Not drawn: trial${data.diverged.length === 1 ? "" : "s"} ${which}, pruned as diverged (${data.dimensions[data.dimensions.length - 1].label} went NaN, infinite or orders of magnitude off).`;
  }
  if (!data.trials.length) {
    div.textContent = "No trial has a value yet.";
    return;
  }
  const metric = data.dimensions[data.dimensions.length - 1].label; // the colour's too
  const dimensions = data.dimensions.map((d) => {
    const dim = { label: d.label, values: d.values };
    if (d.tickformat) dim.tickformat = d.tickformat;
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
        colorbar: { title: { text: metric, side: "right" }, thickness: 12 },
      },
      dimensions: dimensions,
    }],
    PlotFrame.layout(div, {
      title: { text: `${metric} of each trial, by its settings`, font: { size: 13 } },
      margin: { l: 70, r: 90, t: 80, b: 30 }, height: 400,
    }, PlotFrame.config()),
    PlotFrame.config(),
  ).then(() => div.setAttribute("data-ready", "1"));
})();
