// The alert-rule form asks only for the settings the chosen kind reads
// (monitoring.alerts.rules.KIND_SETTINGS); the others are hidden and not kept.
(function () {
  "use strict";
  const form = document.getElementById("alert-rule-form");
  const data = document.getElementById("kind-settings");
  if (!form || !data) return;
  const settings = JSON.parse(data.textContent);
  const kind = form.querySelector("#id_kind");
  const threshold = form.querySelector('[data-field="threshold"] label');
  const names = ["series", "threshold", "step", "factor"];

  function show() {
    const used = settings[kind.value] || [];
    for (const name of names) {
      const field = form.querySelector(`[data-field="${name}"]`);
      if (field) field.hidden = !used.includes(name);
    }
    if (threshold) threshold.firstChild.textContent = kind.value === "time_limit" ? "Minutes left" : "Bound";
  }
  kind.addEventListener("change", show);
  show();
})();
