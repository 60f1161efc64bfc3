// The portal's notices inside JupyterLab's own page (sessions/notice.py adds this script
// through the proxy): the idle warning with the time the portal will stop the session, and
// the time limit coming close. Asked every `data-every` seconds; shown in a box of its own
// over the page's lower right corner, above JupyterLab's status bar. JupyterLab's page
// loads none of the portal's style sheets, so the box is styled here.
(function () {
  "use strict";
  const me = document.currentScript;
  const url = me && me.dataset.notice;
  const every = Math.max(2, Number(me && me.dataset.every) || 20) * 1000;
  if (!url) return;
  let box = null;
  let hidden = "";  // the text the person hid: shown again once it changes

  const ensureBox = () => {
    if (box) return box;
    box = document.createElement("aside");
    box.id = "portal-session-notice";
    box.setAttribute("role", "alert");
    box.setAttribute("aria-label", "From the portal");
    Object.assign(box.style, {
      position: "fixed", right: "16px", bottom: "40px", zIndex: "100000", maxWidth: "440px",
      padding: "12px 14px", borderRadius: "6px", border: "1px solid #b45309",
      background: "#fef3c7", color: "#1f2937", font: "14px/1.45 system-ui, sans-serif",
      boxShadow: "0 4px 16px rgba(0,0,0,.2)", display: "none",
    });
    document.body.appendChild(box);
    return box;
  };

  const show = (texts) => {
    const joined = texts.join("\n");
    if (!texts.length || joined === hidden) {
      if (box) box.style.display = "none";
      return;
    }
    const el = ensureBox();
    el.replaceChildren();
    const title = document.createElement("strong");
    title.textContent = "From the portal";
    el.appendChild(title);
    for (const text of texts) {
      const p = document.createElement("p");
      p.style.margin = "6px 0 0";
      p.textContent = text;
      el.appendChild(p);
    }
    const hide = document.createElement("button");
    hide.type = "button";
    hide.textContent = "Hide";
    Object.assign(hide.style, { marginTop: "8px", font: "inherit", cursor: "pointer" });
    hide.addEventListener("click", () => { hidden = joined; el.style.display = "none"; });
    el.appendChild(hide);
    el.style.display = "block";
  };

  const ask = async () => {
    let answer;
    try {
      answer = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    } catch (err) {
      return true;  // the portal unreachable for now: ask again later
    }
    if (answer.status === 403 || answer.status === 404) {
      show(["Your access to this session through the portal has ended (signed out, or no longer allowed). Sign in to the portal again to go on."]);
      return false;
    }
    if (!answer.ok) return true;
    const data = await answer.json();
    show((data.notices || []).map((n) => String(n.text)));
    return true;
  };

  const loop = async () => {
    if (await ask()) setTimeout(loop, every);
  };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", loop);
  } else {
    loop();
  }
})();
