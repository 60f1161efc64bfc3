// The job page: log console and charts, filled over REST, kept live over a WebSocket.
// Live messages are hints: any gap in log offsets is fetched again over REST.
(function () {
  "use strict";
  const config = JSON.parse(document.getElementById("job-config").textContent);
  const logEl = document.getElementById("log");
  const follow = document.getElementById("log-follow");
  const search = document.getElementById("log-search");
  const matches = document.getElementById("log-matches");
  const formats = config.formats; // file and series names, from jobs/rundir.py
  const GPU_SERIES = new RegExp(formats.gpuSeriesPattern);
  const MAX_LOG_CHARS = 2000000; // the console keeps the tail; the download has all
  const GPU_METRICS = ["utilization", "memory_used", "temperature", "power"];
  const GPU_TITLES = {
    utilization: "Utilisation (%)", memory_used: "Memory used (MiB)",
    temperature: "Temperature (°C)", power: "Power (W)",
  };
  let logText = "";
  let logEnd = 0; // byte offset of the next expected log byte
  let fetching = null;
  const traces = {}; // series name -> {chart, index}
  const raw = {}; // metric name -> {x: [], y: []} before smoothing

  async function getJSON(url) {
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) throw new Error(`${url}: ${response.status}`);
    return response.json();
  }

  // ---- log ----
  function renderLog() {
    const term = search.value;
    if (!term) {
      logEl.textContent = logText;
      matches.textContent = "";
    } else {
      const parts = logText.split(term);
      logEl.textContent = "";
      parts.forEach((part, i) => {
        logEl.append(part);
        if (i < parts.length - 1) {
          const mark = document.createElement("mark");
          mark.textContent = term;
          logEl.append(mark);
        }
      });
      matches.textContent = `${parts.length - 1} matches`;
    }
    if (follow.checked) logEl.scrollTop = logEl.scrollHeight;
  }

  function appendLog(text, end) {
    logText += text.replace(/\r(?!\n)/g, "\n");
    if (logText.length > MAX_LOG_CHARS) logText = logText.slice(-MAX_LOG_CHARS);
    logEnd = end;
    renderLog();
  }

  async function fetchLog(offset) {
    // One fetch at a time; a delta arriving meanwhile is covered by the next read.
    if (fetching) return fetching;
    fetching = (async () => {
      try {
        for (;;) {
          const slice = await getJSON(`${config.logUrl}?offset=${offset}&limit=262144`);
          if (slice.end <= logEnd && offset !== -1) break;
          if (offset === -1 && slice.offset > 0) logText = `[… ${slice.offset} earlier bytes: use Download …]\n`;
          appendLog(slice.text, slice.end);
          if (slice.end >= slice.size) break;
          offset = slice.end;
        }
      } finally {
        fetching = null;
      }
    })();
    return fetching;
  }

  function onLogDelta(log) {
    if (log.file !== formats.logFile || log.end <= logEnd) return;
    if (log.offset === logEnd && typeof log.text === "string") appendLog(log.text, log.end);
    else fetchLog(logEnd); // a gap or a large delta: read it over REST
  }

  // ---- charts ----
  function smooth(values) {
    const alpha = Number(document.getElementById("loss-smooth").value);
    if (!alpha) return values;
    let last = values.length ? values[0] : 0;
    return values.map((v) => (last = alpha * last + (1 - alpha) * v));
  }

  function gpuParts(name) {
    const parts = GPU_SERIES.exec(name); // gpu/<node>/<index>/<metric>
    return parts ? { node: parts[1], index: parts[2], metric: parts[3] } : null;
  }

  const METRIC_TITLES = { "chart-throughput": "Throughput and MFU", "chart-other": "Other metrics" };

  function chartFor(name) {
    const gpu = gpuParts(name);
    if (gpu) return { el: `chart-${gpu.metric}`, label: `${gpu.node} GPU ${gpu.index}`, time: true };
    // Losses share one chart; rates and counters of another scale get their own.
    if (/loss/i.test(name)) return { el: "chart-metrics", label: name, time: false };
    if (/per_sec|_per_s$|\/s$|^mfu$|^samples$|^tokens$/.test(name)) return { el: "chart-throughput", label: name, time: false };
    return { el: "chart-other", label: name, time: false };
  }

  function addTrace(name, xs, ys) {
    const chart = chartFor(name);
    const el = document.getElementById(chart.el);
    if (!el) return;
    const x = chart.time ? xs.map((t) => new Date(t * 1000)) : xs;
    if (!chart.time) raw[name] = { x: xs.slice(), y: ys.slice() };
    const trace = { x, y: chart.time ? ys : smooth(ys), name: chart.label, mode: "lines", type: "scattergl" };
    if (!el.data) {
      const title = chart.time ? GPU_TITLES[gpuParts(name).metric] : METRIC_TITLES[chart.el] || "";
      Plotly.newPlot(el, [trace], {
        margin: { t: title ? 30 : 10, r: 10, b: 35, l: 50 }, title: { text: title, font: { size: 13 } },
        xaxis: { title: { text: chart.time ? "" : "step" } }, legend: { orientation: "h" },
        yaxis: { type: chart.el === "chart-metrics" && document.getElementById("loss-log").checked ? "log" : "linear" },
      }, { responsive: true, displaylogo: false });
    } else {
      Plotly.addTraces(el, trace);
    }
    traces[name] = { el, index: el.data.length - 1, time: chart.time };
  }

  function extend(name, points) {
    if (!points.length) return;
    const xs = points.map((p) => p[0]);
    const ys = points.map((p) => p[1]);
    const t = traces[name];
    if (!t) return addTrace(name, xs, ys);
    if (!t.time) {
      raw[name].x.push(...xs);
      raw[name].y.push(...ys);
      if (Number(document.getElementById("loss-smooth").value)) return restyleMetrics();
    }
    Plotly.extendTraces(t.el, { x: [t.time ? xs.map((v) => new Date(v * 1000)) : xs], y: [ys] }, [t.index], 20000);
  }

  function restyleMetrics() {
    Object.entries(traces).forEach(([name, t]) => {
      if (!t.time) Plotly.restyle(t.el, { x: [raw[name].x], y: [smooth(raw[name].y)] }, [t.index]);
    });
  }

  function updateNumbers(name, points) {
    if (!points.length) return;
    const [x, y] = points[points.length - 1];
    const set = (id, text) => (document.getElementById(id).textContent = text);
    if (name === "loss") { set("num-step", x); set("num-loss", y.toPrecision(4)); }
    if (name === "tokens_per_sec" || name === "samples_per_sec") set("num-throughput", `${y.toFixed(1)} ${name.split("_")[0]}/s`);
    if (name === "mfu") set("num-mfu", `${(100 * y).toFixed(1)} %`);
    if (name.endsWith("/utilization")) {
      const util = Object.keys(traces).filter((n) => n.endsWith("/utilization"))
        .map((n) => { const d = traces[n].el.data[traces[n].index].y; return d[d.length - 1]; });
      if (util.length) set("num-gpu", `${(util.reduce((a, b) => a + b, 0) / util.length).toFixed(0)} %`);
    }
  }

  async function loadSeries() {
    const names = await getJSON(config.seriesUrl);
    for (const name of names.names || names) {
      const data = await getJSON(`${config.seriesUrl}/${name}?max_points=2000`);
      if (!traces[name]) addTrace(name, data.x, data.y);
      updateNumbers(name, data.x.map((x, i) => [x, data.y[i]]));
    }
  }

  // ---- live ----
  function connect(delay) {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}${config.wsUrl}`);
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.event !== "delta" && message.event !== "hello") return;
      if (message.state) {
        const badge = document.getElementById("job-state");
        if (badge.dataset.state && badge.dataset.state !== message.state) {
          const item = document.createElement("li");
          item.textContent = `${new Date().toISOString().slice(0, 19).replace("T", " ")} → ${message.state}`;
          document.getElementById("timeline").append(item);
        }
        badge.dataset.state = message.state;
        badge.textContent = message.state;
        badge.className = `state state-${message.state.toLowerCase()}`;
      }
      if (message.log) onLogDelta(message.log);
      Object.entries(message.series || {}).forEach(([name, points]) => {
        extend(name, points);
        updateNumbers(name, points);
      });
    };
    socket.onopen = () => { delay = 1000; fetchLog(logEnd || -1); };
    socket.onclose = (event) => {
      // Not allowed, or access ended (logout, removed from the project): do not retry.
      if ([4403, 4401].includes(event.code)) return;
      setTimeout(() => connect(Math.min(delay * 2, 15000)), delay);
    };
  }

  search.addEventListener("input", renderLog);
  document.getElementById("log-end").addEventListener("click", () => {
    follow.checked = true;
    logEl.scrollTop = logEl.scrollHeight;
  });
  logEl.addEventListener("scroll", () => {
    if (logEl.scrollTop + logEl.clientHeight < logEl.scrollHeight - 20) follow.checked = false;
  });
  document.getElementById("loss-log").addEventListener("change", (event) => {
    const el = document.getElementById("chart-metrics");
    if (el.data) Plotly.relayout(el, { "yaxis.type": event.target.checked ? "log" : "linear" });
  });
  document.getElementById("loss-smooth").addEventListener("input", restyleMetrics);

  fetchLog(-1).then(loadSeries).finally(() => connect(1000));
})();
