// The submit form's expected starts: once a preview answer is valid (the preview is
// debounced, so this follows a settled burst of typing, never each keystroke), ask when the
// job and its alternatives would start (web.jobs.starts) and show them; an alternative can
// be taken with a click, which changes the form's fields.
(function () {
  "use strict";
  const form = document.getElementById("job-form");
  const box = document.getElementById("starts");
  if (!form || !box) return;
  const rows = document.getElementById("starts-rows");
  const status = document.getElementById("starts-status");
  const basis = document.getElementById("starts-basis");
  let sequence = 0;

  function cell(text, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }

  function limitText(minutes) {
    return Math.floor(minutes / 60) + ":" + String(minutes % 60).padStart(2, "0") + ":00";
  }

  function take(option) {
    const values = {
      cluster: option.cluster,
      partition: option.partition,
      nodes: String(option.nodes),
      gpus_per_node: String(option.gpus_per_node),
      time_limit: limitText(option.time_limit_minutes),
    };
    for (const [name, value] of Object.entries(values)) {
      const input = form.elements[name];
      if (input && input.value !== value) input.value = value;
    }
    form.dispatchEvent(new Event("change", { bubbles: true }));
  }

  function show(options) {
    // One problem for every row (the cluster did not answer): said once.
    const problems = new Set(options.map((o) => o.problem));
    if (options.length > 1 && problems.size === 1 && options[0].problem) {
      const tr = document.createElement("tr");
      const only = cell(options[0].problem, "muted");
      only.colSpan = 3;
      tr.append(only);
      rows.replaceChildren(tr);
      basis.textContent = "";
      return;
    }
    rows.replaceChildren(...options.map((o) => {
      const tr = document.createElement("tr");
      tr.dataset.chosen = o.chosen ? "true" : "false";
      const label = document.createElement("td");
      const name = document.createElement(o.chosen ? "strong" : "span");
      name.textContent = o.label;
      label.append(name);
      const expected = o.problem ? cell(o.problem, "muted") : cell(o.expected);
      if (o.line) {
        const why = document.createElement("small");
        why.className = "muted line-note";
        why.textContent = "Waits in the project's line first: " + o.line + ".";
        expected.append(document.createElement("br"), why);
      }
      if (!o.chosen && !o.problem) {
        const use = document.createElement("button");
        use.type = "button";
        use.className = "secondary";
        use.textContent = "use";
        use.addEventListener("click", () => take(o));
        expected.append(" ", use);
      }
      tr.append(label, expected, cell(o.slurm || "–", "muted"));
      return tr;
    }));
    const chosen = options.find((o) => o.chosen);
    basis.textContent = chosen && chosen.basis ? "Expected start: " + chosen.basis + "." : "";
  }

  async function ask(data) {
    const mine = ++sequence;
    if (!data.script) return; // the form has errors: the preview says what to fix
    status.textContent = "asking Slurm…";
    try {
      const body = new FormData(form);
      body.delete("code_archive");
      const response = await fetch(box.dataset.startsUrl, {
        method: "POST",
        body,
        headers: { "X-CSRFToken": body.get("csrfmiddlewaretoken"), Accept: "application/json" },
      });
      if (mine !== sequence) return;
      if (!response.ok) { status.textContent = "unavailable (" + response.status + ")"; return; }
      const answer = await response.json();
      show(answer.options);
      status.textContent = answer.message || "";
      box.dataset.asked = String(mine);
    } catch (err) {
      if (mine === sequence) status.textContent = "unavailable";
    }
  }

  form.addEventListener("preview", (event) => ask(event.detail));
})();
