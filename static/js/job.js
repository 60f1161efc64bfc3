// The job page: it follows the job, not one attempt. It connects to the live stream
// first, then backfills over REST, so nothing written while it loads falls between the
// two (a point read both ways is one point: job-charts.js keys them by step). Every
// delta names its attempt; a new attempt adds its log tab and becomes the one shown.
(function () {
  "use strict";
  const config = JSON.parse(document.getElementById("job-config").textContent);
  const urlOf = (template, n) => template.replace("{n}", String(n));
  const attempts = {}; // number -> {state, startedAt}
  config.attempts.forEach((a) => (attempts[a.number] = { state: a.state, startedAt: a.startedAt }));
  let current = config.attempt;
  let totalSteps = config.totalSteps;
  let mfuTerms = config.mfu;
  const pace = []; // [time ms, step] of the current attempt, as seen live
  const DELTA_POINTS = 2000; // monitoring.ingest.watch: points per series in one delta
  const namesPending = new Set(); // attempts whose series names (and kinds) need reading

  const charts = window.JobCharts({ formats: config.formats, mfu: config.mfu, attempt: current, onDraw: updateNumbers });
  const log = window.JobLog({ urls: config.urls, formats: config.formats });
  window.jobPage = { charts, log, current: () => current }; // for tests and the console

  async function getJSON(url) {
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) throw new Error(`${url}: ${response.status}`);
    return response.json();
  }

  // ---- numbers, progress, MFU ----
  // A session's page has no numbers card (templates/monitoring/job.html): absent ids are skipped.
  const set = (id, text) => {
    const el = document.getElementById(id);
    if (el) el.textContent = text;
  };

  // The newest point among series of these kinds (the furthest step; ties: the first kind).
  function latestOf(kinds) {
    let best = null;
    for (const name of charts.names().sort()) {
      const kind = charts.kindOf(name);
      if (!kinds.includes(kind)) continue;
      const point = charts.last(name, current);
      if (!point) continue;
      const better = !best || point[0] > best.point[0]
        || (point[0] === best.point[0] && kinds.indexOf(kind) < kinds.indexOf(best.kind));
      if (better) best = { name, kind, point };
    }
    return best;
  }

  // A job that prints no step: its points' x numbers its records (0 first), never shown as a step.
  const recordsOnly = () => (document.getElementById("num-step") || { dataset: {} }).dataset.x === "records";

  function updateNumbers() {
    const loss = charts.last("loss", current) ? { point: charts.last("loss", current) } : latestOf(["loss"]);
    if (loss) { set("num-step", recordsOnly() ? loss.point[0] + 1 : loss.point[0]); set("num-loss", Number(loss.point[1]).toPrecision(4)); }
    const rate = latestOf(["token_rate", "sample_rate", "step_rate"]);
    if (rate) {
      const unit = { token_rate: "tokens/s", sample_rate: "samples/s", step_rate: "steps/s" }[rate.kind];
      set("num-throughput", Units.quantity(rate.point[1], unit)); // 128k tokens/s, as the runs table
      const shown = document.getElementById("num-throughput");
      if (shown) shown.title = rate.name; // text: never markup
    }
    const printedMfu = charts.last("mfu", current);
    const computedMfu = charts.last("mfu_computed", current);
    const mfu = printedMfu || computedMfu;
    if (printedMfu) set("num-mfu", `${printedMfu[1]} (printed)`);
    else if (computedMfu) set("num-mfu", `${(100 * computedMfu[1]).toFixed(1)} %`);
    const util = charts.names().filter((n) => n.endsWith("/utilization")).map((n) => charts.last(n, current)).filter(Boolean);
    if (util.length) set("num-gpu", `${(util.reduce((a, p) => a + p[1], 0) / util.length).toFixed(0)} %`);
    updateMfuNote(Boolean(mfu));
    updateProgress();
  }

  function updateMfuNote(shown) {
    let text = "";
    if (mfuTerms.source === "printed") text = "MFU as the trainer prints it (its own peak and FLOP count).";
    else if (mfuTerms.source === "computed") {
      const peak = `${mfuTerms.gpus} GPU${mfuTerms.gpus === 1 ? "" : "s"} × ${mfuTerms.peak_tflops} TFLOP/s dense BF16 peak${mfuTerms.gpu_model ? ` (${mfuTerms.gpu_model})` : ""}`;
      text = shown
        ? `MFU = tokens/s × 6 × ${Number(mfuTerms.model_params).toLocaleString("en")} FLOPs ÷ (${peak}).`
        : `No MFU yet: it needs the job's tokens per second, which the log has not given: print a whole-job tokens/s, or for a Hugging Face Trainer set include_num_input_tokens_seen=True (or give block_size and per_device_train_batch_size in the job's parameters); peak used: ${peak}.`;
    } else text = `No MFU: it needs ${mfuTerms.missing.join(" and ")}.`;
    set("mfu-note", text);
  }

  function stepNow() {
    const found = latestOf(["loss", "token_rate", "sample_rate", "step_rate", "mfu", "total", "other"]);
    return found ? found.point[0] : null;
  }

  function updateProgress() {
    const box = document.getElementById("progress");
    if (!box) return;
    const step = stepNow();
    if (!totalSteps || step === null || recordsOnly()) { box.hidden = true; return; }
    box.hidden = false;
    const now = Date.now();
    if (!pace.length || pace[pace.length - 1][1] !== step) pace.push([now, step]);
    while (pace.length > 2 && now - pace[0][0] > 120000) pace.shift();
    const done = Math.min(step / totalSteps, 1);
    document.getElementById("progress-bar").value = done;
    let eta = "";
    const state = (attempts[current] || {}).state;
    if (config.finalStates.includes(state)) eta = state === "COMPLETED" ? " · finished" : " · stopped";
    else {
      // The pace seen live once it spans 20 s; before that, the attempt's average since it started.
      let rate = null;
      const [t0, s0] = pace[0];
      if (now - t0 >= 20000 && step > s0) rate = (step - s0) / ((now - t0) / 1000);
      const started = (attempts[current] || {}).startedAt;
      const first = charts.firstStep(current);
      if (rate === null && started && first !== null) {
        // From the step it started at: a resumed attempt did not do the steps before.
        const seconds = (now - Date.parse(started)) / 1000;
        if (seconds > 0 && step > first) rate = (step - first + 1) / seconds;
      }
      if (rate && rate > 0) {
        const left = Math.max(totalSteps - step, 0) / rate;
        eta = ` · ETA ${formatSeconds(left)} at ${rate.toPrecision(3)} steps/s`;
      } else eta = " · ETA after a few more steps";
    }
    set("progress-text", `step ${step} of ${totalSteps} (${(100 * done).toFixed(0)} %)${eta}`);
  }

  function formatSeconds(s) {
    if (s < 90) return `${Math.round(s)} s`;
    if (s < 5400) return `${Math.round(s / 60)} min`;
    return `${(s / 3600).toFixed(1)} h`;
  }

  // ---- series ----
  async function loadNames(n) {
    const names = await getJSON(urlOf(config.urls.series, n));
    charts.setKinds(names.kinds || {});
    charts.setSources(names.sources || {}); // the legend names a trainer's record file
    if (n === current) {
      if (names.total_steps && names.total_steps !== totalSteps) {
        totalSteps = names.total_steps;
        updateProgress();
      }
      if (names.mfu) { mfuTerms = names.mfu; charts.setMfu(mfuTerms); }
    }
    return names.names || [];
  }

  async function readSeries(n, name) {
    // The name is data: encoded, so `?`, `#` or `%` in it stay part of the path.
    const data = await getJSON(`${urlOf(config.urls.series, n)}/${encodeURIComponent(name)}?max_points=2000`);
    charts.put(n, name, data.x, data.y, data.nonfinite);
  }

  async function backfill(n) {
    const names = await loadNames(n);
    const wanted = names.filter((name) => n === current || charts.kindOf(name) !== "gpu");
    // A few at a time, not one after another: a page loads in one round of requests.
    const queue = wanted.slice();
    const worker = async () => {
      for (let name = queue.shift(); name !== undefined; name = queue.shift()) await readSeries(n, name);
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
  }

  let namesTimer = null;
  function refreshNamesSoon(n) {
    namesPending.add(n);
    if (namesTimer) return;
    namesTimer = setTimeout(() => {
      namesTimer = null;
      const pending = Array.from(namesPending);
      namesPending.clear();
      pending.forEach((a) => loadNames(a).catch(() => namesPending.add(a)));
    }, 1000);
  }

  // ---- attempts, timeline, failure banner ----
  function showAttempt(n) {
    const previous = current;
    if (n <= current && n in attempts) return;
    attempts[n] = attempts[n] || { state: null, startedAt: null };
    if (n > current) {
      current = n;
      pace.length = 0;
      charts.setCurrent(n);
      set("attempt-of", document.getElementById("attempt-of").textContent.replace(/attempt \d+/, `attempt ${n}`));
      document.getElementById("gpu-attempt").textContent = `attempt ${n}`;
      refreshAttempts();
      refreshBanner(0);
    }
    log.follow(n, previous);
    backfill(n).catch(() => refreshNamesSoon(n));
  }

  async function refreshAttempts() {
    const rows = await getJSON(`/api/v1/jobs/${config.job}/attempts/`);
    rows.forEach((a) => {
      // The state only where none is known: a push that came while this was read is newer.
      const known = attempts[a.number] || {};
      attempts[a.number] = Object.assign(known, { startedAt: a.started_at, state: known.state || a.state });
    });
  }

  async function refreshTimeline() {
    const events = await getJSON(config.urls.events);
    const list = document.getElementById("timeline");
    list.textContent = "";
    for (const e of events) {
      const item = document.createElement("li");
      const time = document.createElement("time");
      time.dateTime = e.time;
      time.textContent = new Date(e.time).toISOString().slice(0, 19).replace("T", " ");
      const to = document.createElement("strong");
      to.textContent = e.to_state;
      item.append(time, ` attempt ${e.attempt ?? "–"}: ${e.from_state || "·"} → `, to);
      if (e.reason) {
        const reason = document.createElement("span");
        reason.className = "muted";
        reason.textContent = ` — ${e.reason}`;
        item.append(reason);
      }
      list.append(item);
    }
    if (events.length) {
      const state = events[events.length - 1].to_state;
      const badge = document.getElementById("job-state");
      badge.dataset.state = state;
      badge.textContent = state;
      badge.className = `state state-${state.toLowerCase()}`;
    }
  }

  // The banner is the server's markup (one template): read this page again and take it.
  async function refreshBanner(tries) {
    const response = await fetch(location.pathname, { credentials: "same-origin" });
    if (!response.ok) return;
    const doc = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = doc.getElementById("failure-slot");
    const slot = document.getElementById("failure-slot");
    if (fresh && slot) slot.replaceWith(fresh);
    showDiagnosedLine();
    replaceFacts(doc);
    if (fresh && fresh.dataset.pending && tries < 40) setTimeout(() => refreshBanner(tries + 1), 3000);
  }

  // The header's facts (Slurm id, nodes, pending reason, times, a hang) and the hang banner
  // are the server's markup too.
  // The banner's log box opens on the line its diagnosis quotes, else on the log's last line.
  function showDiagnosedLine() {
    const box = document.querySelector("#failure-banner .last-lines");
    if (!box) return;
    const line = box.querySelector("mark.diagnosed");
    if (!line) { box.scrollTop = box.scrollHeight; return; }
    const at = line.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
    box.scrollTop = Math.max(0, at - box.clientHeight / 3);
  }

  function replaceFacts(doc) {
    for (const id of ["job-facts", "hang-slot", "attempt-of"]) {
      const fresh = doc && doc.getElementById(id);
      const here = document.getElementById(id);
      if (fresh && here) here.replaceWith(fresh);
    }
    tickElapsed();
  }

  async function refreshFacts() {
    const response = await fetch(location.pathname, { credentials: "same-origin" });
    if (response.ok) replaceFacts(new DOMParser().parseFromString(await response.text(), "text/html"));
  }

  function tickElapsed() {
    const el = document.getElementById("fact-elapsed");
    if (!el || !el.dataset.started || el.dataset.ended) return;
    const s = Math.max(0, Math.floor((Date.now() - Date.parse(el.dataset.started)) / 1000));
    const two = (v) => String(v).padStart(2, "0");
    const hms = `${Math.floor((s % 86400) / 3600)}:${two(Math.floor((s % 3600) / 60))}:${two(s % 60)}`;
    el.textContent = s >= 86400 ? `${Math.floor(s / 86400)}-${two(Math.floor((s % 86400) / 3600))}${hms.slice(hms.indexOf(":"))}` : hms;
  }
  setInterval(tickElapsed, 1000);
  // A hang sends no delta: while the attempt runs, its facts and hang banner are read each minute.
  setInterval(() => {
    if ((attempts[current] || {}).state === "RUNNING") refreshFacts().catch(() => {});
  }, 60000);

  function onState(n, state) {
    const known = attempts[n] || {};
    if (known.state === state) return;
    const before = known.state;
    attempts[n] = Object.assign(known, { state });
    refreshTimeline().catch(() => {});
    refreshFacts().catch(() => {});
    if (state === "RUNNING" && !known.startedAt) refreshAttempts().catch(() => {});
    if (n === current && before !== undefined && config.failedStates.includes(state)) refreshBanner(0);
    updateProgress();
  }

  // ---- live ----
  let backfilled = false;
  // An alert's link names the attempt it fired on: its log opens first.
  function askedAttempt() {
    const asked = Number(new URLSearchParams(location.search).get("attempt"));
    return asked in attempts ? asked : current;
  }

  function onHello(message) {
    const rows = message.attempts || [];
    rows.forEach((a) => {
      // A state that changed between the page's rendering and this hello: later deltas
      // repeat it, so it reaches the badge and the timeline here.
      if (a.state) onState(a.attempt, a.state);
      log.addTab(a.attempt);
      log.announce(a.attempt, (a.log_sizes || {})[config.formats.logFile] || 0);
    });
    const latest = rows.length ? rows[rows.length - 1].attempt : current;
    if (latest > current) showAttempt(latest);
    if (!backfilled) {
      // Backfill once, after the socket has joined: later deltas fill the rest.
      backfilled = true;
      log.select(askedAttempt());
      Object.keys(attempts).map(Number).forEach((n) => backfill(n).catch(() => refreshNamesSoon(n)));
    } else {
      log.refresh(log.selected()); // a reconnect: read what the stream missed
      Object.keys(attempts).map(Number).forEach((n) => backfill(n).catch(() => {}));
    }
  }

  function onDelta(message) {
    const n = message.attempt;
    if (typeof n !== "number") return;
    if (!(n in attempts) || n > current) showAttempt(n);
    if (message.state) onState(n, message.state);
    if (message.log) log.onDelta(n, message.log);
    for (const [name, points] of Object.entries(message.series || {})) {
      if (!charts.knows(name)) refreshNamesSoon(n);
      charts.put(n, name, points.map((p) => p[0]), points.map((p) => p[1]));
      // A delta carries a series' last DELTA_POINTS points only: a full one may hide a gap.
      if (points.length >= DELTA_POINTS) readSeries(n, name).catch(() => {});
    }
    if (n === current && !totalSteps) refreshNamesSoon(n); // the log may have said the total by now
  }

  function connect(delay) {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}${config.wsUrl}`);
    let opened = false;
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.event === "hello") onHello(message);
      else if (message.event === "delta") onDelta(message);
    };
    socket.onopen = () => { opened = true; delay = 1000; };
    socket.onclose = (event) => {
      // Not allowed, or access ended (logout, removed from the project): do not retry.
      if ([4403, 4401].includes(event.code)) return;
      if (!opened && !backfilled) {
        // No stream at all: still show what is stored.
        backfilled = true;
        log.select(askedAttempt());
        Object.keys(attempts).map(Number).forEach((n) => backfill(n).catch(() => {}));
      }
      // Back soon after a server or Redis restart, a little apart so that pages do not
      // all knock at once; at most about every 5 s while it stays down.
      setTimeout(() => connect(Math.min(delay * 2, 5000)), delay * (0.75 + Math.random() / 2));
    };
  }

  document.getElementById("loss-log")?.addEventListener("change", () => charts.redrawLoss());
  document.getElementById("loss-smooth")?.addEventListener("input", () => charts.redrawLoss());
  document.getElementById("gpu-attempt").textContent = `attempt ${current}`;
  updateMfuNote(false);
  showDiagnosedLine();
  if (document.getElementById("failure-slot").dataset.pending) refreshBanner(0);
  setInterval(updateProgress, 2000); // the ETA counts down between points too
  connect(1000);
})();
