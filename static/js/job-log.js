// The job page's log console: a tab per attempt, each with its own bytes and offsets.
// A live delta is appended when it starts where the tab's text ends; anything else
// (a gap, a delta too big to carry its text) is read over REST up to the furthest
// end any delta has announced, so nothing that arrives while a read runs is lost.
(function () {
  "use strict";
  const MAX_LOG_CHARS = 2000000; // the console keeps the tail; the download has all

  window.JobLog = function (options) {
    const logEl = document.getElementById("log");
    const follow = document.getElementById("log-follow");
    const search = document.getElementById("log-search");
    const matches = document.getElementById("log-matches");
    const tabs = document.getElementById("log-tabs");
    const logs = {}; // attempt -> {text, end, wanted, fetching, loaded}
    let selected = null;

    const urlOf = (template, n) => template.replace("{n}", String(n));

    function logOf(n) {
      return (logs[n] = logs[n] || { text: "", end: 0, wanted: 0, fetching: null, loaded: false });
    }

    const finder = window.LogSearch({
      log: logEl,
      input: search,
      regex: document.getElementById("log-regex"),
      filter: document.getElementById("log-filter"),
      matches,
      prev: document.getElementById("log-prev"),
      next: document.getElementById("log-next"),
      onMove: () => (follow.checked = false), // the reader is looking at a match
    });

    function render() {
      const log = selected === null ? null : logs[selected];
      finder.draw(log ? log.text : "");
      if (follow.checked && !finder.active()) logEl.scrollTop = logEl.scrollHeight;
    }

    function append(n, text, end) {
      const log = logOf(n);
      log.text += text.replace(/\r(?!\n)/g, "\n");
      if (log.text.length > MAX_LOG_CHARS) log.text = log.text.slice(-MAX_LOG_CHARS);
      log.end = end;
      if (n === selected) render();
    }

    // Read from the tab's end (or its tail first) until every announced byte is there.
    function fetchLog(n) {
      const log = logOf(n);
      if (log.fetching) return log.fetching;
      log.fetching = (async () => {
        try {
          let offset = log.loaded ? log.end : -1;
          for (;;) {
            const response = await fetch(`${urlOf(options.urls.log, n)}?offset=${offset}&limit=262144`, { credentials: "same-origin" });
            if (!response.ok) throw new Error(`log ${n}: ${response.status}`);
            const slice = await response.json();
            if (offset === -1) {
              log.loaded = true;
              log.text = slice.offset > 0 ? `[… ${slice.offset} earlier bytes: use download …]\n` : "";
              log.end = slice.offset;
            }
            if (slice.end > log.end) append(n, slice.text, slice.end);
            if (slice.end >= slice.size && log.end >= log.wanted) break;
            if (slice.end <= offset && offset !== -1) break; // nothing more stored yet
            offset = log.end;
          }
        } finally {
          log.fetching = null;
        }
        if (log.end < log.wanted) setTimeout(() => fetchLog(n), 500); // announced, not stored yet
      })();
      return log.fetching;
    }

    function onDelta(n, delta) {
      if (delta.file !== options.formats.logFile) return;
      const log = logOf(n);
      log.wanted = Math.max(log.wanted, delta.end);
      if (!log.loaded || delta.end <= log.end) return; // a tab not opened yet reads it all when it is
      if (!log.fetching && delta.offset === log.end && typeof delta.text === "string") append(n, delta.text, delta.end);
      else fetchLog(n);
    }

    function addTab(n) {
      if (tabs.querySelector(`.tab-item[data-attempt="${n}"]`)) return;
      const item = document.createElement("span");
      item.className = "tab-item";
      item.dataset.attempt = String(n);
      const button = document.createElement("button");
      button.type = "button";
      button.className = "tab";
      button.setAttribute("role", "tab");
      button.id = `log-tab-${n}`;
      button.dataset.attempt = String(n);
      button.textContent = `Attempt ${n}`;
      const link = document.createElement("a");
      link.className = "download";
      link.href = urlOf(options.urls.download, n);
      link.setAttribute("download", "");
      link.title = `Download attempt ${n}'s whole log`;
      link.textContent = "download";
      item.append(button, link);
      tabs.append(item);
    }

    function select(n) {
      addTab(n);
      selected = n;
      tabs.querySelectorAll(".tab").forEach((tab) => {
        tab.setAttribute("aria-selected", tab.dataset.attempt === String(n) ? "true" : "false");
      });
      render();
      if (!logOf(n).loaded) fetchLog(n);
    }

    tabs.addEventListener("click", (event) => {
      const tab = event.target.closest(".tab");
      if (tab) select(Number(tab.dataset.attempt));
    });
    for (const control of [search, document.getElementById("log-regex"), document.getElementById("log-filter")]) {
      control.addEventListener("input", () => { finder.reset(); render(); });
    }
    document.getElementById("log-end").addEventListener("click", () => {
      follow.checked = true;
      logEl.scrollTop = logEl.scrollHeight;
    });
    logEl.addEventListener("scroll", () => {
      if (logEl.scrollTop + logEl.clientHeight < logEl.scrollHeight - 20) follow.checked = false;
    });

    return {
      onDelta,
      addTab,
      select,
      // A new attempt: its tab opens if the reader was on the latest one.
      follow(n, previous) {
        addTab(n);
        if (selected === null || selected === previous) select(n);
      },
      announce(n, size) { const log = logOf(n); log.wanted = Math.max(log.wanted, size); },
      refresh(n) { if (logOf(n).loaded) fetchLog(n); },
      selected: () => selected,
      text: (n) => (logs[n] ? logs[n].text : ""),
    };
  };
})();
