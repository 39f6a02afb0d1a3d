"""The first part of the Connect view's script (`_assets.SCRIPT`): its setup, the formatting of
values and times, the cells of a connector's row and the filter. It opens the script's one
function scope, which `_script_actions` closes: the parts are served as one file, never apart.

Times are kept as the data's ISO strings on the elements that show them (`data-clock`), and a
clock re-renders those of the rows on screen every second (`tick` in `_script_actions`): "3 s ago"
and "in 12 min" stay true between two polls, at the cost of the visible cells only."""

from __future__ import annotations

__all__ = ["ROWS_SCRIPT"]

ROWS_SCRIPT = r"""
"use strict";
(() => {
  const body = document.body;
  const SELF = new URL(body.dataset.self, window.location.href);
  const REST = new URL(body.dataset.rest.replace(/\/*$/, "/"), SELF);
  const DAGS = body.dataset.dags ? new URL(body.dataset.dags.replace(/\/*$/, "/"), SELF) : null;
  // Airflow's REST API (same origin, the UI's session cookie): where a run asked for is followed.
  const AIRFLOW = body.dataset.airflow ? new URL(body.dataset.airflow.replace(/\/*$/, "/"), SELF) : null;
  const POLL_MS = Number(body.dataset.poll) || 5000;
  // The caller's Connect role: actions it may not do are not offered (the REST app refuses them anyway).
  const ROLE = { viewer: 1, connector: 2, operator: 3 }[body.dataset.role] || 1;
  const SVG = "http://www.w3.org/2000/svg";
  // After "Run now", how long the row says "queued" while no newer run shows (Airflow may be busy).
  const QUEUED_MS = 5 * 60 * 1000;
  // The run's stats that time its parts, in the order a run spends them.
  const TIMINGS = [["python_s", "Python start"], ["spark_session_s", "Spark session"], ["work_s", "work"],
    ["commit_s", "commit"], ["run_s", "whole run"]];

  const tbody = document.querySelector("#connectors tbody");
  const search = document.getElementById("search");
  const stateFilter = document.getElementById("state");
  const shown = document.getElementById("shown");
  const statusLine = document.getElementById("status");
  const title = document.getElementById("title");
  const poolsBody = document.querySelector("#pools tbody");

  /** name -> {tr, sig, data, detail, queued, traces} */
  const rows = new Map();
  let order = [];
  let inFlight = false;
  let polls = 0;

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function stateEl(tag, state, text) {
    const e = el(tag, text === undefined ? state : text);
    e.dataset.state = String(state);
    return e;
  }

  function say(message, isError) {
    statusLine.textContent = message;
    statusLine.className = isError ? "error" : "";
  }

  function span(seconds) {
    if (seconds < 90) return Math.round(seconds) + " s";
    if (seconds < 5400) return Math.round(seconds / 60) + " min";
    if (seconds < 129600) return Math.round(seconds / 3600) + " h";
    return Math.round(seconds / 86400) + " d";
  }

  function ago(iso) {
    const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    return isFinite(s) ? span(s) + " ago" : "";
  }

  function until(iso) {
    const s = (Date.parse(iso) - Date.now()) / 1000;
    if (!isFinite(s)) return "";
    return s < 1 ? "due" : "in " + span(s);
  }

  function lasting(iso) {
    const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    return isFinite(s) ? "for " + span(s) : "";
  }

  const CLOCKS = { ago: ago, until: until, for: lasting };

  /** A time shown relative to now, re-rendered by the clock from its ISO time (the full time on hover). */
  function clock(kind, iso, prefix) {
    const e = el("span", null, "clock");
    e.dataset.clock = kind;
    e.dataset.at = String(iso);
    e.dataset.prefix = prefix || "";
    e.title = String(iso);
    e.textContent = clockText(e);
    return e;
  }

  function clockText(e) {
    return e.dataset.prefix + CLOCKS[e.dataset.clock](e.dataset.at);
  }

  function num(v) {
    return typeof v === "number" && isFinite(v) ? v : null;
  }

  function seconds(v) {
    return v < 10 ? v.toFixed(2) + " s" : v.toFixed(1) + " s";
  }

  /** "Spark session 1.20 s · work 0.40 s · …" of a run's timings (those it recorded). */
  function breakdown(timings) {
    const t = timings && typeof timings === "object" ? timings : {};
    return TIMINGS.filter(([k]) => num(t[k]) !== null).map(([k, label]) => label + " " + seconds(t[k])).join(" · ");
  }

  /** An inline SVG of rows per run (oldest left); failed runs are red dots on the baseline. */
  function sparkline(values) {
    const w = 80, h = 22, pad = 2;
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
    a.target = "_top";  // on its own (not framed): the whole window
    a.addEventListener("click", (e) => {
      if (e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
      if (navigateAirflow(href)) e.preventDefault();
    });
    return a;
  }

  /** Inside Airflow's page the view is an iframe whose sandbox forbids navigating the top window
   * (no allow-top-navigation), so a link cannot leave the frame. The frame is of Airflow's origin
   * (allow-same-origin): Airflow's own router is asked to go there, as its links do (a history
   * entry, then the popstate its router listens to). False when not framed by a page of this origin. */
  function navigateAirflow(href) {
    let top;
    try {
      top = window.top;
      if (top === window || top.location.origin !== new URL(href).origin) return false;
      const at = (top.history.state && typeof top.history.state.idx === "number") ? top.history.state.idx : 0;
      top.history.pushState({ usr: null, key: Math.random().toString(36).slice(2, 10), idx: at + 1 }, "", href);
      top.dispatchEvent(new top.PopStateEvent("popstate", { state: top.history.state }));
      return true;
    } catch (_) {
      return false;  // another origin's page: the link's own target
    }
  }

  /** The newest run id the row knows: a run newer than it ends "queued". */
  function newestRun(c) {
    let id = c.last_run ? Number(c.last_run.run_id) : 0;
    for (const r of c.running) id = Math.max(id, Number(r.run_id));
    return id;
  }

  /** Whether the row still waits for the run "Run now" asked for: until a newer run shows, Airflow's
   * run ended without one (seen a poll before: a skip, e.g. nothing new to read), or a timeout. */
  function queued(entry, c) {
    const q = entry.queued;
    if (!q) return false;
    if (newestRun(c) > q.after) {
      entry.queued = null;
      return false;
    }
    if (q.ended && polls > q.endedPoll) {
      entry.queued = null;
      say(c.name + ": Airflow's run ended (" + q.ended + ") without a Connect run: its task skipped " +
        "(nothing new to read, or the connector is not running)", false);
      return false;
    }
    if (Date.now() - q.at > QUEUED_MS) {
      entry.queued = null;
      return false;
    }
    return true;
  }

  /** What the connector does now, in words an operator reads: Kafka's state stays in the API and the title. */
  function stateCell(c, isQueued) {
    const td = stateEl("td", c.state, "");
    td.className = "state";
    td.title = "state (as the REST API says it): " + c.state;
    const failed = c.tasks.filter((t) => t.state === "FAILED").length;
    const startedAt = c.running.map((r) => r.started_at).sort()[0];
    if (startedAt) {
      td.appendChild(clock("for", startedAt, "running "));
      td.dataset.activity = "running";
    } else if (isQueued) {
      td.appendChild(el("span", "queued"));
      td.dataset.activity = "queued";
    } else if (c.state === "RUNNING" && !failed) {
      td.appendChild(el("span", "idle"));
      td.dataset.activity = "idle";
      if (c.next_run) td.appendChild(clock("until", c.next_run, " · next run "));
      else if (c.schedule) td.appendChild(el("span", " · " + c.schedule));
    } else {
      td.appendChild(el("span", c.state));
    }
    if (failed) {
      td.appendChild(stateEl("span", "FAILED", " · " + failed + (failed > 1 ? " tasks" : " task") + " failed"));
      td.dataset.flag = "task-failed";
    }
    const snap = c.snapshot && c.snapshot.progress;
    if (snap) {  // the details tell which table, and what is queued
      td.appendChild(el("span", " · snapshot " + (snap.paused ? "paused" : snap.table ? "reading" : "queued") +
        " (" + Number(snap.rows).toLocaleString("en-US") + " rows)", "snap"));
    }
    return td;
  }

  function lastRunCell(c, isQueued) {
    const td = el("td");
    const startedAt = c.running.map((r) => r.started_at).sort()[0];
    const previous = c.last_run ? "previous run: " + c.last_run.state + " at " + c.last_run.finished_at : "";
    if (startedAt || isQueued) {
      td.appendChild(startedAt ? clock("for", startedAt, "running ") : el("span", "queued"));
      td.dataset.activity = startedAt ? "running" : "queued";
      td.title = previous;
      return td;
    }
    if (!c.last_run) return td;
    td.appendChild(stateEl("span", c.last_run.state));
    if (c.last_run.finished_at) td.appendChild(clock("ago", c.last_run.finished_at, " "));
    const times = breakdown(c.last_run.timings);
    const lines = ["run " + c.last_run.run_id + " " + c.last_run.state];
    if (num(c.last_run.duration_s) !== null) lines.push("duration " + seconds(c.last_run.duration_s));
    if (times) lines.push(times);
    td.title = lines.join("\n");
    td.dataset.timings = times;
    return td;
  }

  function errorCell(c) {
    const td = el("td", null, "err");
    const e = c.last_error;
    if (!e) return td;
    const count = c.failures > 1 ? c.failures + " failed runs; last: " : "";
    td.textContent = (e.past ? "past: " : "") + count + (e.cause || "");
    td.title = (e.cause || "") + "\nrun " + e.run_id + ", task " + e.task + ", " + (e.at || "") +
      (e.past ? "\nbefore the last successful run (" + e.succeeded_since + ")" : "") + "\nthe trace: open the details";
    if (e.past) td.classList.add("past");
    return td;
  }

  function actionsCell(c) {
    const td = el("td", null, "actions");
    if (ROLE < 2) return td;
    td.appendChild(button("trigger", "Run now"));
    if (c.state === "STOPPED") td.appendChild(button("resume", "Start"));
    else if (c.state === "PAUSED") td.appendChild(button("resume", "Resume"));
    else td.appendChild(button("pause", "Pause"));
    // The rarer actions, each asking for a confirmation, in one control: the column stays narrow.
    const more = el("select", null, "more");
    more.dataset.action = "more";
    more.setAttribute("aria-label", "more actions");
    more.title = "more actions (each asks to confirm)";
    const options = [["", "More…"], ["restart-failed", "Restart failed"], ["restart-all", "Restart all"]];
    if (c.snapshot && c.snapshot.accepts_signals) options.push(["snapshot-start", "Snapshot tables…"]);
    if (c.state !== "STOPPED") options.push(["stop", "Stop"]);
    if (ROLE >= 3) options.push(["reset", "Reset offsets"]);
    for (const [value, label] of options) {
      const o = el("option", label);
      o.value = value;
      more.appendChild(o);
    }
    td.appendChild(more);
    return td;
  }

  function cells(c, isQueued) {
    const tds = [];
    const nameTd = el("td");
    const toggle = el("button", c.name, "linkish");
    toggle.type = "button";
    toggle.dataset.action = "details";
    toggle.title = "details: the error's cause, a sink's tables, tasks, error history, last runs";
    nameTd.appendChild(toggle);
    tds.push(nameTd);
    tds.push(el("td", String(c.type).toUpperCase()));
    tds.push(stateCell(c, isQueued));
    const tasks = el("td");
    const counts = {};
    c.tasks.forEach((t) => { counts[t.state] = (counts[t.state] || 0) + 1; });
    Object.keys(counts).sort().forEach((s, i) => {
      if (i) tasks.appendChild(document.createTextNode(" "));
      tasks.appendChild(stateEl("span", s, counts[s] + " " + s));
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
    tds.push(lastRunCell(c, isQueued));
    const schedule = el("td", c.schedule || "");
    if (c.next_run) schedule.title = "next run: " + c.next_run;
    tds.push(schedule);
    tds.push(el("td", c.pools.join(", ")));
    tds.push(errorCell(c));
    const links = el("td");
    if (DAGS) {
      links.appendChild(link(new URL(encodeURIComponent(c.dag_id), DAGS).href, "DAG"));
      links.appendChild(document.createTextNode(" "));
      links.appendChild(link(new URL(encodeURIComponent(c.dag_id) + "/runs", DAGS).href, "runs"));
    }
    tds.push(links);
    tds.push(actionsCell(c));
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
"""
