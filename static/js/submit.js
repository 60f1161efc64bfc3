// The submit form's live side: as fields change (debounced), ask the preview
// endpoint for the errors, the batch script and the estimate. Writes nothing.
(function () {
  "use strict";
  const form = document.getElementById("job-form");
  if (!form) return;
  const url = form.dataset.previewUrl;
  const partition = document.getElementById("id_partition");
  const status = document.getElementById("preview-status");
  let partitionsOf = form.querySelector("#id_cluster") ? form.querySelector("#id_cluster").value : "";
  let timer = null;
  // An empty field the user has not reached yet is not an error to shout about.
  const touched = new Set();
  let sequence = 0;

  function showErrors(errors) {
    for (const list of form.querySelectorAll("ul.errors")) {
      const name = list.id.replace(/^err-/, "");
      if (name === "__all__" && !(name in errors)) continue; // the submission's own message stays
      const input = form.elements[name];
      const reached = touched.has(name) || !input || input.value !== "" || list.children.length > 0;
      const messages = reached ? errors[name] || [] : [];
      list.replaceChildren(...messages.map((m) => { const li = document.createElement("li"); li.textContent = m; return li; }));
      const field = form.querySelector('[data-field="' + name + '"]');
      if (field) field.classList.toggle("has-error", messages.length > 0);
      if (input && input.setAttribute) input.setAttribute("aria-invalid", messages.length ? "true" : "false");
    }
    // Errors on fields the form does not show (none expected) go to the top.
    const top = document.getElementById("err-__all__");
    for (const [name, messages] of Object.entries(errors)) {
      if (!document.getElementById("err-" + name)) {
        for (const m of messages) { const li = document.createElement("li"); li.textContent = m; top.appendChild(li); }
      }
    }
  }

  function showPartitions(cluster, partitions) {
    if (cluster === partitionsOf) return;
    partitionsOf = cluster;
    const keep = partition.value;
    const options = [new Option("Cluster default", "")];
    for (const p of partitions) {
      const label = p.name + (p.default ? " (default)" : "") + " · " + p.gpus_per_node + " GPUs/node · max " + p.max_time;
      options.push(new Option(label, p.name, false, p.name === keep));
    }
    partition.replaceChildren(...options);
  }

  function text(id, value) { document.getElementById(id).textContent = value === null || value === undefined ? "–" : value; }

  // Each cluster the project may use, with how long jobs of this shape waited there; the
  // soonest one can be chosen with a click (the cluster field changes, the preview follows).
  function showWaits(rows, sooner) {
    const box = document.getElementById("est-waits");
    box.hidden = rows.length < 2;
    document.getElementById("est-waits-rows").replaceChildren(...rows.map((w) => {
      const tr = document.createElement("tr");
      tr.dataset.cluster = w.cluster;
      const name = document.createElement("td");
      name.textContent = w.cluster + (w.chosen ? " (chosen)" : "");
      const wait = document.createElement("td");
      wait.textContent = w.typical + (w.soonest ? " · soonest" : "");
      const select = form.querySelector("#id_cluster");
      if (w.soonest && !w.chosen && select) {
        const use = document.createElement("button");
        use.type = "button";
        use.className = "secondary";
        use.textContent = "use " + w.cluster;
        use.addEventListener("click", () => { select.value = w.cluster; select.dispatchEvent(new Event("change", { bubbles: true })); });
        wait.append(" ", use);
      }
      tr.append(name, wait);
      return tr;
    }));
    document.getElementById("est-sooner").textContent = sooner;
  }

  function showEstimate(e) {
    if (!e) { ["est-gpu-hours", "est-cost", "est-left-before", "est-left-after", "est-cpu-hours", "est-cpu-left", "est-typical-wait"].forEach((id) => text(id, null)); text("est-message", ""); showWaits([], ""); return; }
    text("est-gpu-hours", e.gpu_hours);
    text("est-cost", e.cost === null ? "–" : e.cost + " (" + e.price_per_gpu_hour + " per GPU-h)");
    text("est-left-before", e.left_before === null ? "unlimited" : e.left_before + " GPU-h");
    text("est-left-after", e.left_after === null ? "unlimited" : e.left_after + " GPU-h");
    text("est-cpu-hours", e.cpu_hours + " (" + e.cpus + (e.cpus === 1 ? " CPU)" : " CPUs)"));
    text("est-cpu-left", e.cpu_left_before === null ? "unlimited" : e.cpu_left_before + " CPU-h");
    text("est-typical-wait", e.typical_wait);
    showWaits(e.waits || [], e.sooner || "");
    const message = document.getElementById("est-message");
    message.textContent = e.message || "";
    message.className = e.fits ? "muted" : "error";
  }

  // The plan from a measured run ("Plan a bigger run"): what the run entered would take at
  // that run's throughput per GPU; or why it cannot be planned, never a guessed number.
  function showPlan(p) {
    if (!document.getElementById("plan")) return;
    const figures = ["plan-duration", "plan-gpu-hours", "plan-cost", "plan-left-after", "plan-throughput", "plan-efficiency"];
    const message = document.getElementById("plan-message");
    if (!p || !p.ok) {
      figures.forEach((id) => text(id, null));
      text("plan-measured", "");
      text("plan-basis", "");
      message.textContent = p ? p.message : "";
      message.className = "error";
      return;
    }
    const m = p.measured;
    text("plan-measured", "Measured: " + m.throughput + " " + p.unit + "/s on " + m.gpus + " GPU" + (m.gpus === 1 ? "" : "s") + " (" + m.per_gpu + " per GPU), " + m.step_seconds + " s per step.");
    text("plan-duration", p.duration + " (" + p.steps + " steps, " + p.steps_from + ")");
    text("plan-gpu-hours", p.gpu_hours + " on " + p.gpus + " GPU" + (p.gpus === 1 ? "" : "s"));
    text("plan-cost", p.cost);
    text("plan-left-after", p.left_after === null ? "unlimited" : p.left_after + " of " + p.left_before + " GPU-h");
    text("plan-throughput", p.throughput + " " + p.unit + "/s (" + p.per_gpu + " per GPU)");
    text("plan-efficiency", p.efficiency + " (" + p.efficiency_note + ")");
    text("plan-basis", "Step time from " + p.measured.basis + "; " + p.step_seconds + " s per step planned.");
    const notes = [p.message, p.short_limit].filter(Boolean);
    message.textContent = notes.length ? notes.join(" ") : "Fits the budget left.";
    message.className = p.fits && !p.short_limit ? "muted" : "error";
  }

  async function preview() {
    const mine = ++sequence;
    status.textContent = "updating…";
    try {
      const body = new FormData(form);
      body.delete("code_archive"); // the preview never uploads the code
      const response = await fetch(url, {
        method: "POST",
        body,
        headers: { "X-CSRFToken": body.get("csrfmiddlewaretoken"), Accept: "application/json" },
      });
      if (mine !== sequence) return; // a newer request is on its way
      if (!response.ok) { status.textContent = "preview unavailable (" + response.status + ")"; return; }
      const data = await response.json();
      showPartitions(data.cluster, data.partitions);
      if (data.run_base) document.getElementById("run-base").textContent = data.run_base;
      showErrors(data.errors);
      document.getElementById("script").textContent = data.script || "Fix the fields marked in red to see the script.";
      showEstimate(data.estimate);
      showPlan(data.plan);
      // Other parts of the form (expected starts, sizing from history) follow the same answer.
      form.dispatchEvent(new CustomEvent("preview", { detail: data }));
      status.textContent = Object.keys(data.errors).length ? "needs changes" : "ready";
      form.dataset.previewed = String(mine);
    } catch (err) {
      if (mine === sequence) status.textContent = "preview unavailable";
    }
  }

  function schedule() { clearTimeout(timer); timer = setTimeout(preview, 300); }
  const note = (event) => { if (event.target.name) touched.add(event.target.name); schedule(); };
  form.addEventListener("input", note);
  form.addEventListener("change", note);
  form.addEventListener("submit", () => form.querySelectorAll("[name]").forEach((el) => touched.add(el.name)));
  preview();
})();
