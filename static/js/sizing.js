// The submit form's "From past runs" (monitoring.runs.sizing, in each preview answer's
// `sizing`): the basis of the suggested time limit, the warnings, and buttons that set the
// time limit or the GPUs when clicked; what the user typed is never changed otherwise.
(function () {
  "use strict";
  const form = document.getElementById("job-form");
  const box = document.getElementById("sizing");
  if (!form || !box) return;

  function item(text) { const li = document.createElement("li"); li.textContent = text; return li; }

  // A button that sets fields to `values` ({name: value}) and lets the preview follow.
  function useButton(label, values) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "secondary";
    button.textContent = label;
    button.addEventListener("click", () => {
      for (const [name, value] of Object.entries(values)) {
        const input = form.elements[name];
        if (!input) continue;
        input.value = String(value);
        input.dispatchEvent(new Event("input", { bubbles: true }));
      }
    });
    return button;
  }

  function show(s) {
    const warnings = document.getElementById("sizing-warnings");
    const facts = document.getElementById("sizing-facts");
    const use = document.getElementById("sizing-use");
    box.hidden = !s || (!s.ok && !s.message);
    if (!s || !s.ok) {
      warnings.replaceChildren();
      facts.replaceChildren();
      use.replaceChildren();
      document.getElementById("sizing-basis").textContent = "";
      document.getElementById("sizing-message").textContent = s ? s.message : "";
      return;
    }
    warnings.replaceChildren(...s.warnings.map((w) => { const li = item(w.text); li.dataset.kind = w.kind; return li; }));
    facts.replaceChildren(...s.facts.map(item));
    document.getElementById("sizing-basis").textContent = s.basis;
    document.getElementById("sizing-message").textContent = "";
    const buttons = [];
    if (!s.time_limit.asked) buttons.push(useButton("use " + s.time_limit.text, { time_limit: s.time_limit.value }));
    if (s.gpus) buttons.push(useButton("use " + s.gpus.text, { nodes: s.gpus.nodes, gpus_per_node: s.gpus.gpus_per_node }));
    use.replaceChildren(...buttons.flatMap((b, i) => (i ? [" ", b] : [b])));
  }

  form.addEventListener("preview", (event) => show(event.detail.sizing));
})();
