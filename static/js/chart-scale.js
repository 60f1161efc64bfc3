// Log scale and smoothing of step charts, one rule for the job page and compare.
// Smoothing is an exponential moving average over the drawn points: each value becomes
// alpha x the smoothed value before it + (1 - alpha) x itself (alpha 0: as logged). It
// restarts after a gap (y null, a NaN or infinite value), so a gap never bleeds into the
// values after it. Log scale makes the y axis logarithmic: Plotly leaves values <= 0 out.
(function () {
  "use strict";

  function ema(values, alpha) {
    if (!alpha) return values;
    let last = values.length ? values[0] : 0;
    return values.map((v) => (last = alpha * last + (1 - alpha) * v));
  }

  function smoothed(values, alpha) {
    if (!alpha) return values.slice();
    const out = [];
    let run = [];
    for (const v of values) {
      if (v === null) { out.push(...ema(run, alpha), null); run = []; } else run.push(v);
    }
    return out.concat(ema(run, alpha));
  }

  // The smoothing weight a range input holds (0 to 0.99), 0 where it is missing or not a number.
  function alphaOf(input) {
    const alpha = input ? Number(input.value) : 0;
    return Number.isFinite(alpha) && alpha > 0 && alpha < 1 ? alpha : 0;
  }

  // A y axis layout with the log box's choice applied (Plotly's default type otherwise).
  function yAxis(axis, log) {
    const out = { ...axis };
    if (log) out.type = "log";
    else if (out.type === "log") delete out.type;
    return out;
  }

  window.ChartScale = { smoothed, alphaOf, yAxis };
})();
