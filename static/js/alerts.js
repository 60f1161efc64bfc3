// The top bar's unread alert count, and a browser notification for each new alert
// while a portal page is open (only when the user granted the permission).
(function () {
  "use strict";
  const link = document.getElementById("alerts-link");
  const badge = document.getElementById("alerts-count");
  if (!link || !badge) return;
  const url = link.dataset.unread;
  const SEEN = "portal.alerts.seen";
  const EVERY = 15000;

  function notify(alerts) {
    const first = localStorage.getItem(SEEN) === null; // alerts from before: no pop-ups
    const seen = Number(localStorage.getItem(SEEN) || 0);
    const fresh = alerts.filter((a) => a.id > seen);
    localStorage.setItem(SEEN, String(Math.max(seen, ...fresh.map((a) => a.id))));
    if (first || !fresh.length) return;
    if (!("Notification" in window) || Notification.permission !== "granted") return;
    for (const alert of fresh.reverse()) {
      const shown = new Notification("GPU portal alert", { body: alert.message, tag: "alert-" + alert.id });
      shown.onclick = () => { window.focus(); window.location.href = alert.url; };
    }
  }

  async function poll() {
    try {
      const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) return;
      const body = await response.json();
      badge.textContent = String(body.count);
      badge.hidden = body.count === 0;
      notify(body.alerts);
    } catch (e) {
      // Offline or the server restarting: the next poll tries again.
    }
  }

  const ask = document.getElementById("alerts-enable-notifications");
  if (ask && "Notification" in window) {
    ask.hidden = Notification.permission !== "default";
    ask.addEventListener("click", () => Notification.requestPermission().then(() => { ask.hidden = true; }));
  }
  poll();
  setInterval(poll, EVERY);
})();
