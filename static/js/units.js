// Numbers as pages print them, the rule of portal_lib/units.py: three significant digits,
// thousands as k, M, G, T, and the unit (128k tokens/s, 4.98k samples/s, 3.3 steps/s, 71 °C).
// A chart's hover and a table's cell read the same.
(function () {
  "use strict";
  const DASH = "\u2013";
  const PREFIXES = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  const RATE_UNITS = { tokens: "tokens/s", samples: "samples/s", steps: "steps/s" };

  // Python's "{:.3g}": 1.28e+17, 2.5e-05, 12.3.
  function general(value) {
    const exp = Math.floor(Math.log10(Math.abs(Number(value.toPrecision(3)))));
    if (exp < -4 || exp >= 3) {
      const [mantissa, power] = value.toExponential(2).split("e");
      const n = Number(power);
      return `${String(Number(mantissa))}e${n < 0 ? "-" : "+"}${String(Math.abs(n)).padStart(2, "0")}`;
    }
    return String(Number(value.toPrecision(3)));
  }

  function significant(value) {
    return String(Number(value.toPrecision(3)));
  }

  function number(value) {
    if (value === null || value === undefined || value === "") return DASH;
    const n = Number(value);
    if (Number.isNaN(n)) return "NaN";
    if (!Number.isFinite(n)) return n > 0 ? "∞" : "-∞";
    const size = Math.abs(n);
    if (size === 0) return "0";
    if (size < 1e-3 || size >= 1e15) return general(n);
    for (const [scale, prefix] of PREFIXES) {
      if (size >= scale * 0.9995) return significant(n / scale) + prefix;
    }
    return significant(n);
  }

  function quantity(value, unit) {
    if (value === null || value === undefined) return DASH;
    const text = number(value);
    return unit ? `${text} ${unit}` : text;
  }

  function rateUnit(kind) {
    return RATE_UNITS[kind] || (kind ? `${kind}/s` : "/s");
  }

  window.Units = { number, quantity, rateUnit };
})();
