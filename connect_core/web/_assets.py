"""The Connect view's script and style sheet, served by the view app as `view.js` and `view.css`.

Kept as Python strings, not package data files: they ship with the package however it is
installed (a wheel, an editable install, the Docker image's copy of the tree).

The script builds every element with `createElement` and puts data in with `textContent`,
`dataset` and `setAttribute` of numbers only, never `innerHTML`: connector names stored before
the naming rule, errors and traces are shown as text whatever they hold. The page's
Content-Security-Policy allows only these two files, so even a slip would run no injected script.
It acts through the REST app's own routes (same origin, same auth: Airflow's session cookie
inside Airflow), polls one JSON document of the view for every connector, and touches only the
rows whose data changed: 1,000 connectors stay responsive.
"""

from __future__ import annotations

__all__ = ["SCRIPT", "STYLE"]

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.2rem;color:#1f2937;font-size:14px}
h1{font-size:1.35rem;margin:.2rem 0 .8rem} h2{font-size:1.05rem;margin:1.2rem 0 .4rem}
table{border-collapse:collapse;margin:.3rem 0 1rem}
th,td{border:1px solid #d1d5db;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f4f6;position:sticky;top:0;z-index:1}
code,pre{font-size:.8rem} pre{white-space:pre-wrap;max-width:70rem;margin:.2rem 0;background:#f9fafb;padding:.3rem}
.bar{display:flex;gap:.6rem;align-items:center;margin:.4rem 0;flex-wrap:wrap}
.bar input{min-width:18rem;padding:.25rem}
#status{color:#374151}#status.error{color:#b91c1c;font-weight:600}
[data-state=RUNNING],[data-state=SUCCEEDED]{color:#047857}
[data-state=FAILED],[data-state=FENCED],[data-state=DEAD]{color:#b91c1c;font-weight:600}
[data-state=PAUSED],[data-state=STOPPED],[data-state=UNASSIGNED],[data-state=ABANDONED]{color:#92400e}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.err{max-width:22rem;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;color:#b91c1c}
button{font-size:.75rem;margin:0 .15rem .15rem 0;padding:.1rem .35rem;cursor:pointer}
button.danger{border-color:#b91c1c;color:#b91c1c}
button.linkish{text-align:left;border:0;background:none;color:#1d4ed8;text-decoration:underline;padding:0;font-size:inherit}
td.spark{white-space:nowrap} svg.spark{vertical-align:middle}
svg.spark polyline{fill:none;stroke:#2563eb;stroke-width:1.5}
svg.spark circle.failed{fill:#b91c1c} svg.spark line{stroke:#d1d5db}
tr.detail>td{background:#fbfbfd}
"""

SCRIPT = r"""
"use strict";
(() => {
  const body = document.body;
  const SELF = new URL(body.dataset.self, window.location.href);
  const REST = new URL(body.dataset.rest.replace(/\/*$/, "/"), SELF);
  const DAGS = body.dataset.dags ? new URL(body.dataset.dags.replace(/\/*$/, "/"), SELF) : null;
  const POLL_MS = Number(body.dataset.poll) || 5000;
  // The caller's Connect role: actions it may not do are not offered (the REST app refuses them anyway).
  const ROLE = { viewer: 1, connector: 2, operator: 3 }[body.dataset.role] || 1;
  const SVG = "http://www.w3.org/2000/svg";

  const tbody = document.querySelector("#connectors tbody");
  const search = document.getElementById("search");
  const stateFilter = document.getElementById("state");
  const shown = document.getElementById("shown");
  const statusLine = document.getElementById("status");
  const title = document.getElementById("title");
  const poolsBody = document.querySelector("#pools tbody");

  /** name -> {tr, sig, data, detail} */
  const rows = new Map();
  let order = [];
  let inFlight = false;

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function stateEl(tag, state) {
    const e = el(tag, state);
    e.dataset.state = String(state);
    return e;
  }

  function say(message, isError) {
    statusLine.textContent = message;
    statusLine.className = isError ? "error" : "";
  }

  function ago(iso) {
    if (!iso) return "";
    const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (!isFinite(s)) return "";
    if (s < 90) return Math.round(s) + " s ago";
    if (s < 5400) return Math.round(s / 60) + " min ago";
    if (s < 129600) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " d ago";
  }

  function until(iso) {
    const s = (Date.parse(iso) - Date.now()) / 1000;
    if (!isFinite(s)) return "";
    if (s < 1) return "due";
    if (s < 90) return "in " + Math.round(s) + " s";
    if (s < 5400) return "in " + Math.round(s / 60) + " min";
    if (s < 129600) return "in " + Math.round(s / 3600) + " h";
    return "in " + Math.round(s / 86400) + " d";
  }

  function num(v) {
    return typeof v === "number" && isFinite(v) ? v : null;
  }

  /** An inline SVG of rows per run (oldest left); failed runs are red dots on the baseline. */
  function sparkline(values) {
    const w = 100, h = 22, pad = 2;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "spark");
    svg.setAttribute("width", String(w));
    svg.setAttribute("height", String(h));
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
    const vals = values.map(num);
    const max = Math.max(1, ...vals.filter((v) => v !== null));
    const step = vals.length > 1 ? (w - 2 * pad) / (vals.length - 1) : 0;
    const x = (i) => pad + i * step;
    const y = (v) => h - pad - (v / max) * (h - 2 * pad);
    const base = document.createElementNS(SVG, "line");
    base.setAttribute("x1", "0"); base.setAttribute("x2", String(w));
    base.setAttribute("y1", String(h - pad)); base.setAttribute("y2", String(h - pad));
    svg.appendChild(base);
    const points = [];
    vals.forEach((v, i) => {
      if (v === null) {
        const dot = document.createElementNS(SVG, "circle");
        dot.setAttribute("class", "failed");
        dot.setAttribute("cx", x(i).toFixed(1)); dot.setAttribute("cy", String(h - pad)); dot.setAttribute("r", "2");
        svg.appendChild(dot);
      } else {
        points.push(x(i).toFixed(1) + "," + y(v).toFixed(1));
      }
    });
    if (points.length === 1) points.push((Number(points[0].split(",")[0]) + 1).toFixed(1) + "," + points[0].split(",")[1]);
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("points", points.join(" "));
    svg.appendChild(line);
    const tip = document.createElementNS(SVG, "title");
    tip.textContent = "records per run, oldest first: " + vals.map((v) => (v === null ? "failed" : v)).join(", ");
    svg.appendChild(tip);
    return svg;
  }

  function button(action, label, danger) {
    const b = el("button", label, danger ? "danger" : "");
    b.type = "button";
    b.dataset.action = action;
    return b;
  }

  function link(href, text) {
    const a = el("a", text);
    a.href = href;
    a.target = "_top";  // inside Airflow's iframe: open the DAG in the whole window
    return a;
  }

  function cells(c) {
    const tds = [];
    const nameTd = el("td");
    const toggle = el("button", c.name, "linkish");
    toggle.type = "button";
    toggle.dataset.action = "details";
    toggle.title = "details: tasks, error history, last runs";
    nameTd.appendChild(toggle);
    tds.push(nameTd);
    tds.push(el("td", String(c.type).toUpperCase()));
    tds.push(stateEl("td", c.state));
    const tasks = el("td");
    const counts = {};
    c.tasks.forEach((t) => { counts[t.state] = (counts[t.state] || 0) + 1; });
    Object.keys(counts).sort().forEach((s, i) => {
      if (i) tasks.appendChild(document.createTextNode(" "));
      tasks.appendChild(stateEl("span", counts[s] + " " + s));
    });
    if (!c.tasks.length) tasks.textContent = "none";
    tds.push(tasks);
    tds.push(el("td", c.lag === null ? "" : Number(c.lag).toLocaleString("en-US"), "num"));
    const spark = el("td", null, "spark");
    if (c.rows.length) {
      spark.appendChild(sparkline(c.rows));
      const last = c.last_run && num(c.last_run.rows);
      if (last !== null && last !== undefined) spark.appendChild(el("span", " " + last));
    }
    tds.push(spark);
    const lastRun = el("td");
    if (c.last_run) {
      lastRun.appendChild(stateEl("span", c.last_run.state));
      lastRun.appendChild(el("span", " " + ago(c.last_run.finished_at)));
    }
    tds.push(lastRun);
    const next = el("td", c.schedule || "");
    if (c.next_run) {
      next.appendChild(el("span", " · " + until(c.next_run)));
      next.title = c.next_run;
    }
    tds.push(next);
    tds.push(el("td", c.pools.join(", ")));
    const err = el("td", "", "err");
    if (c.last_error) {
      err.textContent = (c.failures > 1 ? c.failures + " failed runs; last: " : "") + c.last_error.error;
      err.title = c.last_error.error;
    }
    tds.push(err);
    const links = el("td");
    if (DAGS) {
      links.appendChild(link(new URL(encodeURIComponent(c.dag_id), DAGS).href, "DAG"));
      links.appendChild(document.createTextNode(" "));
      links.appendChild(link(new URL(encodeURIComponent(c.dag_id) + "/runs", DAGS).href, "runs"));
    }
    tds.push(links);
    const actions = el("td");
    if (ROLE < 2) { tds.push(actions); return tds; }
    if (c.state === "PAUSED") actions.appendChild(button("resume", "Resume"));
    else actions.appendChild(button("pause", "Pause"));
    if (c.state === "STOPPED") actions.appendChild(button("resume", "Start"));
    actions.appendChild(button("trigger", "Run now"));
    actions.appendChild(button("restart-failed", "Restart failed", true));
    actions.appendChild(button("restart-all", "Restart all", true));
    if (c.state !== "STOPPED") actions.appendChild(button("stop", "Stop", true));
    if (ROLE >= 3) actions.appendChild(button("reset", "Reset offsets", true));
    tds.push(actions);
    return tds;
  }

  function matches(c) {
    const q = search.value.trim().toLowerCase();
    const s = stateFilter.value;
    if (q && !String(c.name).toLowerCase().includes(q)) return false;
    if (!s) return true;
    if (s === "TASK_FAILED") return c.tasks.some((t) => t.state === "FAILED");
    if (s === "LAGGING") return (c.lag || 0) > 0;
    return c.state === s;
  }

  function applyFilter() {
    let visible = 0;
    for (const entry of rows.values()) {
      const ok = matches(entry.data);
      entry.tr.hidden = !ok;
      if (entry.detail) entry.detail.hidden = !ok;
      if (ok) visible += 1;
    }
    shown.textContent = "showing " + visible + " of " + rows.size;
  }

  function renderPools(pools) {
    const frag = document.createDocumentFragment();
    for (const p of pools) {
      const tr = el("tr");
      tr.appendChild(el("td", p.name));
      tr.appendChild(el("td", p.kind));
      const master = el("td"); master.appendChild(el("code", p.master)); tr.appendChild(master);
      tr.appendChild(el("td", p.capacity, "num"));
      tr.appendChild(stateEl("td", p.alive ? "RUNNING" : "DEAD")).textContent = p.alive ? "alive" : "DEAD";
      tr.appendChild(el("td", p.seconds_since_heartbeat, "num"));
      const probe = p.probe || {};
      tr.appendChild(el("td", !p.probe || !Object.keys(probe).length ? "" : probe.ok ? "ok" : String(probe.error || "failed")));
      tr.appendChild(el("td", p.connectors, "num"));
      tr.appendChild(el("td", p.tasks, "num"));
      frag.appendChild(tr);
    }
    poolsBody.replaceChildren(frag);
  }

  function render(data) {
    const connectors = data.connectors;
    title.textContent = "Connect: " + connectors.length + " connector(s) on " + data.pools.length + " Spark pool(s)";
    renderPools(data.pools);
    const seen = new Set();
    const names = [];
    let reordered = connectors.length !== order.length;
    connectors.forEach((c, i) => {
      const name = String(c.name);
      seen.add(name);
      names.push(name);
      if (!reordered && order[i] !== name) reordered = true;
      const sig = JSON.stringify(c);
      let entry = rows.get(name);
      if (!entry) {
        const tr = el("tr");
        tr.dataset.name = name;
        entry = { tr: tr, sig: "", data: c, detail: null };
        rows.set(name, entry);
      }
      if (entry.sig !== sig) {
        entry.tr.replaceChildren(...cells(c));
        entry.tr.dataset.state = String(c.state);
        entry.sig = sig;
      }
      entry.data = c;
    });
    for (const [name, entry] of rows) {
      if (!seen.has(name)) {
        entry.tr.remove();
        if (entry.detail) entry.detail.remove();
        rows.delete(name);
      }
    }
    if (reordered) {
      const frag = document.createDocumentFragment();
      for (const name of names) {
        const entry = rows.get(name);
        frag.appendChild(entry.tr);
        if (entry.detail) frag.appendChild(entry.detail);
      }
      tbody.replaceChildren(frag);
      order = names;
    }
    applyFilter();
    tbody.dataset.rendered = String(connectors.length);
    for (const entry of rows.values()) if (entry.detail) fillDetail(entry, false);
  }

  async function refresh() {
    if (inFlight) return;
    inFlight = true;
    try {
      const res = await fetch(new URL("data.json", SELF), { credentials: "same-origin", cache: "no-store" });
      if (!res.ok) throw new Error(res.status === 401 || res.status === 403 ? "not signed in (" + res.status + ")" : "HTTP " + res.status);
      render(await res.json());
      document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    } catch (e) {
      say("could not refresh: " + e.message, true);
    } finally {
      inFlight = false;
    }
  }

  async function call(method, path) {
    const res = await fetch(new URL(path, REST), {
      method: method,
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    });
    if (!res.ok) {
      let message = "HTTP " + res.status;
      try {
        const body = await res.json();
        if (body && body.message) message = String(body.message);
        else if (body && body.detail) message = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
      } catch (_) { /* not JSON */ }
      throw new Error(message);
    }
    return res;
  }

  async function act(name, action) {
    const c = rows.get(name).data;
    const p = "connectors/" + encodeURIComponent(name);
    let steps;
    let done;
    switch (action) {
      case "pause": steps = [["PUT", p + "/pause"]]; done = "paused"; break;
      case "resume": steps = [["PUT", p + "/resume"]]; done = "resumed"; break;
      case "trigger": steps = [["POST", p + "/trigger"]]; done = "run started"; break;
      case "restart-failed":
        if (!window.confirm("Restart the failed tasks of " + name + "?")) return;
        steps = [["POST", p + "/restart?includeTasks=true&onlyFailed=true"]]; done = "failed tasks restarted"; break;
      case "restart-all":
        if (!window.confirm("Restart all tasks of " + name + "?")) return;
        steps = [["POST", p + "/restart?includeTasks=true&onlyFailed=false"]]; done = "restarted"; break;
      case "stop":
        if (!window.confirm("Stop " + name + "? It runs no more until resumed; its config and offsets stay.")) return;
        steps = [["PUT", p + "/stop"]]; done = "stopped"; break;
      case "reset":
        if (c.state !== "STOPPED") {
          if (!window.confirm("Stop " + name + " and reset its offsets? Its next run starts over from the beginning.")) return;
          steps = [["PUT", p + "/stop"], ["DELETE", p + "/offsets"]];
        } else {
          if (!window.confirm("Reset the offsets of " + name + "? Its next run starts over from the beginning.")) return;
          steps = [["DELETE", p + "/offsets"]];
        }
        done = "stopped, offsets reset (resume it to run again)"; break;
      default: return;
    }
    say(action + " " + name + "…", false);
    try {
      for (const [method, path] of steps) await call(method, path);
      say(name + ": " + done, false);
    } catch (e) {
      say(name + ": " + action + " failed: " + e.message, true);
    }
    await refresh();
  }

  function section(container, heading) {
    container.appendChild(el("h2", heading));
  }

  async function fillDetail(entry, fetchHistory) {
    const c = entry.data;
    const td = entry.detail.firstChild;
    let tasksBox = td.querySelector(".tasks");
    if (!tasksBox) {
      tasksBox = el("div", null, "tasks");
      td.replaceChildren(tasksBox, el("div", null, "errors"), el("div", null, "runs"));
    }
    const tasksFrag = document.createDocumentFragment();
    section(tasksFrag, "Tasks");
    const t = el("table");
    const head = el("tr");
    ["task", "state", "worker", "trace"].forEach((h) => head.appendChild(el("th", h)));
    t.appendChild(head);
    for (const task of c.tasks) {
      const tr = el("tr");
      tr.appendChild(el("td", task.id));
      tr.appendChild(stateEl("td", task.state));
      tr.appendChild(el("td", task.worker_id || ""));
      const trace = el("td");
      if (task.trace) trace.appendChild(el("pre", task.trace));
      tr.appendChild(trace);
      t.appendChild(tr);
    }
    tasksFrag.appendChild(t);
    tasksBox.replaceChildren(tasksFrag);
    if (!fetchHistory) return;
    const errorsBox = td.querySelector(".errors");
    const runsBox = td.querySelector(".runs");
    try {
      const q = "?connector=" + encodeURIComponent(c.name);
      const [errors, runs] = await Promise.all([
        fetch(new URL("errors.json" + q, SELF), { credentials: "same-origin" }).then((r) => (r.ok ? r.json() : [])),
        call("GET", "connectors/" + encodeURIComponent(c.name) + "/runs?limit=10").then((r) => r.json()),
      ]);
      const ef = document.createDocumentFragment();
      section(ef, "Error history (failed runs, masked)");
      if (!errors.length) ef.appendChild(el("p", "no failed runs retained"));
      for (const e of errors) {
        ef.appendChild(el("p", "run " + e.run_id + ", task " + e.task + ", " + (e.finished_at || "") + " (" + ago(e.finished_at) + ")"));
        ef.appendChild(el("pre", e.error || ""));
      }
      errorsBox.replaceChildren(ef);
      const rf = document.createDocumentFragment();
      section(rf, "Last runs");
      const rt = el("table");
      const rh = el("tr");
      ["run", "task", "pool", "state", "records", "work s", "duration s", "started", "finished"].forEach((h) => rh.appendChild(el("th", h)));
      rt.appendChild(rh);
      for (const r of runs) {
        const tr = el("tr");
        const stats = r.stats && typeof r.stats === "object" ? r.stats : {};
        tr.appendChild(el("td", r.run_id));
        tr.appendChild(el("td", r.task));
        tr.appendChild(el("td", r.pool || ""));
        tr.appendChild(stateEl("td", r.state));
        tr.appendChild(el("td", num(stats.rows) === null ? "" : stats.rows, "num"));
        tr.appendChild(el("td", num(stats.work_s) === null ? "" : stats.work_s, "num"));
        tr.appendChild(el("td", r.duration_s === null ? "" : r.duration_s, "num"));
        tr.appendChild(el("td", r.started_at || ""));
        tr.appendChild(el("td", r.finished_at || ""));
        rt.appendChild(tr);
      }
      rf.appendChild(rt);
      runsBox.replaceChildren(rf);
    } catch (e) {
      errorsBox.replaceChildren(el("p", "could not read the history: " + e.message));
    }
  }

  function toggleDetail(name) {
    const entry = rows.get(name);
    if (entry.detail) {
      entry.detail.remove();
      entry.detail = null;
      return;
    }
    const tr = el("tr", null, "detail");
    const td = el("td");
    td.colSpan = 11;
    tr.appendChild(td);
    entry.detail = tr;
    entry.tr.after(tr);
    fillDetail(entry, true);
  }

  tbody.addEventListener("click", (event) => {
    const b = event.target.closest("button[data-action]");
    if (!b) return;
    const tr = b.closest("tr[data-name]");
    if (!tr) return;
    const name = tr.dataset.name;
    if (b.dataset.action === "details") toggleDetail(name);
    else act(name, b.dataset.action);
  });

  let searchTimer = 0;
  search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(applyFilter, 80);
  });
  stateFilter.addEventListener("change", applyFilter);

  const initial = document.getElementById("initial");
  render(JSON.parse(initial.textContent));
  initial.remove();
  setInterval(() => { if (!document.hidden) refresh(); }, POLL_MS);
})();
"""
