// Every chart's frame but compare's (the job, project, cluster and sweep pages): the title at
// the left, and on a narrow chart (a phone) below Plotly's mode bar, which sits at the top
// right: a tap that shows the bar never hides the title. The legend sits under the x axis's
// title, so that both axes can be named on the small charts too.
(function () {
  "use strict";
  const NARROW = 600; // px: narrower than this, title and mode bar share no row
  const BAR = 34; // px: the mode bar's row (26 px: its buttons and Plotly's padding) and a gap

  const narrow = (el) => (el.clientWidth || window.innerWidth) < NARROW;

  // The layout as drawn: `config` is the one given to Plotly (no mode bar: no room made).
  function layout(el, given, config) {
    const out = { ...given, margin: { t: 30, r: 15, b: 30, l: 55, ...(given.margin || {}) } };
    for (const key of Object.keys(out)) {
      // Tick labels never run into the axis's title (1.28e+5 beside "tokens/s").
      if (/^[xy]axis\d*$/.test(key)) out[key] = { automargin: true, ...out[key] };
    }
    const bar = !config || config.displayModeBar !== false;
    if (given.title) {
      const title = typeof given.title === "string" ? { text: given.title } : { ...given.title };
      Object.assign(title, { x: 0, xref: "paper", xanchor: "left" });
      if (bar && narrow(el)) {
        Object.assign(title, { yref: "container", y: 1, yanchor: "top", pad: { t: BAR } });
        out.margin.t += BAR;
      }
      out.title = title;
    }
    if (given.legend && given.legend.orientation === "h" && !given.legend.yref) {
      // Under the x axis's ticks and title, whatever the chart's height (Plotly makes room).
      out.legend = { ...given.legend, yref: "container", y: 0, yanchor: "bottom" };
      out.margin.b += 42;
    }
    return out;
  }

  function config(extra) {
    return { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"], ...extra };
  }

  // Plotly.react with the frame; returns Plotly's promise.
  function draw(el, traces, given, extra) {
    const drawn = config(extra);
    return Plotly.react(el, traces, layout(el, given, drawn), drawn);
  }

  window.PlotFrame = { layout, config, draw };
})();
