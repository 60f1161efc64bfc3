// Free GPUs per cluster: the page shows the cached figures, this fetches fresh ones.
(function () {
  "use strict";
  for (const row of document.querySelectorAll("[data-cluster-status]")) {
    fetch(row.dataset.clusterStatus, { headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : null))
      .then((s) => {
        if (!s) return;
        const free = row.querySelector('[data-field="gpus_free"]');
        const queue = row.querySelector('[data-field="pending_jobs"]');
        if (s.error && !s.read_at) { free.textContent = "unreachable"; queue.textContent = "—"; return; }
        free.textContent = s.gpus_free + " / " + s.gpus_total;
        queue.textContent = s.pending_jobs + " pending";
        const cpus = row.querySelector('[data-field="cpus_free"]');
        const memory = row.querySelector('[data-field="memory_free"]');
        if (cpus) cpus.textContent = s.cpus_free + " / " + s.cpus_total;
        if (memory) memory.textContent = s.memory_free_mb + " / " + s.memory_total_mb + " MB";
      })
      .catch(() => {});
  }
})();
