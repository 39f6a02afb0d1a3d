"""The first half of the Connect view's script (`_assets.SCRIPT`): its setup, the formatting of
values, the cells of a connector's row and the filter. It opens the script's one function scope,
which `_script_actions` closes: the halves are served as one file, never apart."""

from __future__ import annotations

__all__ = ["ROWS_SCRIPT"]

ROWS_SCRIPT = r"""
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
"""
