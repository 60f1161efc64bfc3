// Live job states on any page with [data-job-state] badges: one small JSON poll
// for all of them, every few seconds, until every job on the page has finished.
(function () {
  "use strict";
  const INTERVAL_MS = 3000;
  const badges = () => Array.from(document.querySelectorAll("[data-job-state]"));
  let final = ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"];

  function live() {
    return badges().filter((el) => !final.includes(el.dataset.stateValue || el.className.match(/state-(\S+)/)[1].toUpperCase()));
  }

  async function poll() {
    const pending = live();
    if (!pending.length) return;
    const ids = Array.from(new Set(pending.map((el) => el.dataset.jobState)));
    try {
      const response = await fetch("/jobs/states/?ids=" + ids.join(","), { headers: { Accept: "application/json" } });
      if (response.ok) {
        const data = await response.json();
        final = data.final;
        for (const el of badges()) {
          const job = data.jobs[el.dataset.jobState];
          if (!job) continue;
          el.dataset.stateValue = job.state;
          el.textContent = job.label;
          el.className = "state state-" + job.state.toLowerCase();
        }
      }
    } catch (err) {
      // A missed poll is retried on the next tick.
    }
    setTimeout(poll, INTERVAL_MS);
  }
  setTimeout(poll, INTERVAL_MS);
})();
