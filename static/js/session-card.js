// A session's card on its job page: the time left counts down, and the card is drawn
// again (the page reloaded) once the session starts running or ends (the badge is
// updated live by job.js), so Open JupyterLab appears and goes without a manual reload.
(function () {
  "use strict";
  const card = document.getElementById("session-card");
  const badge = document.getElementById("job-state");
  if (!card || !badge) return;
  const stateOf = () => (badge.dataset.state || "").toUpperCase();
  const initial = stateOf();
  new MutationObserver(() => {
    const state = stateOf();
    if (state !== initial && (state === "RUNNING") !== (initial === "RUNNING")) window.location.reload();
  }).observe(badge, { attributes: true, attributeFilter: ["data-state"] });
  const left = document.getElementById("session-time-left");
  const ends = left && left.dataset.ends ? Date.parse(left.dataset.ends) : NaN;
  const out = left && left.querySelector("strong");
  if (!out || Number.isNaN(ends)) return;
  const pad = (n) => String(n).padStart(2, "0");
  const tick = () => {
    const seconds = Math.max(0, Math.floor((ends - Date.now()) / 1000));
    const h = Math.floor(seconds / 3600);
    out.textContent = `${h}:${pad(Math.floor((seconds % 3600) / 60))}:${pad(seconds % 60)}`;
  };
  tick();
  setInterval(tick, 1000);
})();
