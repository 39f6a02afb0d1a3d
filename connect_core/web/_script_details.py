"""The middle part of the Connect view's script (`_assets.SCRIPT`): the pools table and a
connector's details (its error's cause on top, a schema change it paused on, a source's incremental
snapshot with its actions, a sink's tables at their last versions, the tasks,
the error history with each trace folded, the last runs with their time breakdown). Served between `_script_rows` and
`_script_actions`, inside the function scope they open and close."""

from __future__ import annotations

__all__ = ["DETAILS_SCRIPT"]

DETAILS_SCRIPT = r"""
  function renderPools(pools) {
    const frag = document.createDocumentFragment();
    for (const p of pools) {
      const tr = el("tr");
      tr.dataset.pool = String(p.name);
      tr.appendChild(el("td", p.name));
      tr.appendChild(el("td", p.kind));
      const master = el("td"); master.appendChild(el("code", p.master)); tr.appendChild(master);
      tr.appendChild(el("td", p.registered ? p.capacity : "", "num"));
      const health = !p.registered ? "not registered" : p.always_up ? "always up (local)" : p.alive ? "alive" : "DEAD";
      tr.appendChild(stateEl("td", p.alive ? "RUNNING" : "DEAD", health));
      tr.appendChild(el("td", p.seconds_since_heartbeat === null ? "" : p.seconds_since_heartbeat + " s ago", "num"));
      const probe = p.probe || {};
      tr.appendChild(el("td", !Object.keys(probe).length ? "" : probe.ok ? "ok" : String(probe.error || "failed")));
      tr.appendChild(el("td", p.connectors, "num"));
      tr.appendChild(el("td", p.tasks, "num"));
      frag.appendChild(tr);
    }
    poolsBody.replaceChildren(frag);
  }

  function section(container, heading) {
    container.appendChild(el("h2", heading));
  }

  /** A trace, folded: the cause is shown above it, the frames only on demand. */
  function folded(summary, text) {
    const d = el("details");
    d.appendChild(el("summary", summary));
    d.appendChild(el("pre", text));
    return d;
  }

  /** The top of the details: what broke, on one line, or that it is past. */
  function causeBox(c) {
    const box = el("div", null, "cause-box");
    const e = c.last_error;
    if (!e) {
      box.appendChild(el("p", "no failed run retained"));
      return box;
    }
    const line = el("p", null, e.past ? "cause past" : "cause");
    line.appendChild(el("strong", e.past ? "Last error (past): " : "Cause: "));
    line.appendChild(el("span", e.cause || ""));
    box.appendChild(line);
    const when = el("p", "run " + e.run_id + ", task " + e.task + ", " + (e.at || "") + " ", "muted");
    if (e.at) when.appendChild(clock("ago", e.at, "("));
    when.appendChild(document.createTextNode(e.at ? ")" : ""));
    if (e.past) when.appendChild(document.createTextNode("; before the last successful run (" + e.succeeded_since + ")"));
    box.appendChild(when);
    return box;
  }

  /** The schema changes the connector paused on (`schema.propagation`), each with its diff, and
   * what can be done: accept it (the next run lets it through), or start over (reset offsets).
   * Names and types come from the records: text only. */
  function schemaBox(schemas) {
    const box = document.createDocumentFragment();
    const topics = schemas && typeof schemas.topics === "object" && schemas.topics ? schemas.topics : {};
    const pending = Object.entries(topics).filter(([, t]) => t && t.pending);
    if (!pending.length) return box;
    section(box, "Schema change (paused)");
    for (const [topic, t] of pending) {
      const p = t.pending;
      const item = el("div", null, "schema-change");
      item.dataset.topic = topic;
      item.appendChild(el("p", "topic " + topic + ": " + String(p.reason || ""), "cause-line"));
      const d = p.diff && typeof p.diff === "object" ? p.diff : {};
      const lines = [];
      for (const c of d.added || []) lines.push("+ added    " + c.name + " " + c.type);
      for (const c of d.dropped || []) lines.push("- dropped  " + c.name + " " + c.type);
      for (const r of d.retyped || []) lines.push("~ retyped  " + r.name + ": " + r.from + " → " + r.to);
      if (d.key) lines.push("~ key      " + [].concat(d.key.from).join(", ") + " → " + [].concat(d.key.to).join(", "));
      item.appendChild(el("pre", lines.join("\n"), "diff"));
      if (p.accepted) item.appendChild(el("p", "accepted: the next run lets it through", "muted"));
      else if (ROLE >= 2) {
        const actions = el("p");
        actions.appendChild(button("schema-accept", "Accept change"));
        if (ROLE >= 3) {
          actions.appendChild(document.createTextNode(" "));
          actions.appendChild(button("reset", "Reset offsets (start over)", true));
        }
        item.appendChild(actions);
      }
      box.appendChild(item);
    }
    return box;
  }

  /** A source's incremental snapshot, as its committed position holds it (the table being read,
   * rows and chunks read, the tables queued after it, paused), the signals sent that no run took
   * yet, and the actions that send signals: pause, resume, stop, and start one of some tables. */
  function snapshotBox(c) {
    const box = document.createDocumentFragment();
    const s = c.snapshot;
    if (!s) return box;
    section(box, "Incremental snapshot");
    const p = s.progress;
    const line = el("p", null, "snapshot-progress");
    if (!p) {
      line.textContent = "No incremental snapshot running.";
    } else {
      const word = p.paused ? "Paused" : p.table ? "Reading" : "Queued";
      line.appendChild(stateEl("strong", p.paused ? "PAUSED" : "RUNNING", word));
      if (p.table) {
        line.appendChild(document.createTextNode(" " + p.table + ": " + Number(p.rows).toLocaleString("en-US") +
          " rows in " + p.chunks + (p.chunks === 1 ? " chunk" : " chunks") + " read so far"));
      }
      const after = p.queued ? p.queued + (p.queued === 1 ? " table" : " tables") + " queued after it" +
        (p.queued_tables.length ? ": " + p.queued_tables.join(", ") + (p.queued > p.queued_tables.length ? ", …" : "") : "") : "";
      line.appendChild(document.createTextNode(" · " + p.remaining + " left" + (after ? " (" + after + ")" : "")));
      if (p.committed_at) line.appendChild(clock("ago", p.committed_at, " · committed "));
      if (!p.paused && c.state !== "RUNNING") {  // its own state says reading; no run of the connector does
        line.appendChild(el("span", " · the connector is " + c.state + ": no run reads it until it runs again", "muted"));
      }
    }
    box.appendChild(line);
    if (s.pending_count) {
      const said = [];  // the same signal sent again and again: said once, with a count
      let last = null, times = 0;
      for (const g of s.pending) {
        const one = g.type + (g.tables.length ? " (" + g.tables.join(", ") + ")" : "");
        if (one === last) times += 1;
        else {
          if (last !== null) said.push(last + (times > 1 ? " \u00d7" + times : ""));
          last = one;
          times = 1;
        }
      }
      if (last !== null) said.push(last + (times > 1 ? " \u00d7" + times : ""));
      if (s.pending_count > s.pending.length) said.push((s.pending_count - s.pending.length) + " more");
      box.appendChild(el("p", "Waiting for the connector's next run: " + said.join("; "), "muted snapshot-pending"));
    }
    if (ROLE >= 2 && s.accepts_signals) {
      const actions = el("p", null, "snapshot-actions");
      if (p) {
        actions.appendChild(p.paused ? button("snapshot-resume", "Resume snapshot") : button("snapshot-pause", "Pause snapshot"));
        actions.appendChild(button("snapshot-stop", "Stop snapshot", true));
      }
      actions.appendChild(button("snapshot-start", "Snapshot tables…"));
      box.appendChild(actions);
    }
    return box;
  }

  /** A sink's tables at the version each was left by the last committed run that wrote it (a
   * plugin's text: shown as text only). Empty for a source, or a sink that reports no tables. */
  function tablesBox(c) {
    const box = document.createDocumentFragment();
    const tables = Array.isArray(c.tables) ? c.tables : [];
    if (!tables.length) return box;
    const line = el("p", null, "written");
    line.appendChild(el("strong", "Tables: "));
    tables.forEach((t, i) => {
      if (i) line.appendChild(document.createTextNode(" · "));
      const item = el("span", t.name + (t.version ? " @ version " + t.version : ""), "table");
      item.title = "written by run " + t.run_id;
      line.appendChild(item);
      if (t.at) {
        line.appendChild(clock("ago", t.at, " ("));
        line.appendChild(document.createTextNode(")"));
      }
    });
    box.appendChild(line);
    return box;
  }

  function tasksTable(c, traces) {
    const frag = document.createDocumentFragment();
    section(frag, "Tasks");
    const t = el("table");
    const head = el("tr");
    ["task", "state", "worker", "cause"].forEach((h) => head.appendChild(el("th", h)));
    t.appendChild(head);
    for (const task of c.tasks) {
      const tr = el("tr");
      tr.appendChild(el("td", task.id));
      tr.appendChild(stateEl("td", task.state));
      tr.appendChild(el("td", task.worker_id || ""));
      const cause = el("td", task.cause || "");
      const trace = traces && traces[task.id];
      if (trace) cause.appendChild(folded("trace", trace));
      tr.appendChild(cause);
      t.appendChild(tr);
    }
    frag.appendChild(t);
    return frag;
  }

  function errorsList(errors) {
    const frag = document.createDocumentFragment();
    section(frag, "Error history (failed runs, masked)");
    if (!errors.length) frag.appendChild(el("p", "no failed runs retained"));
    for (const e of errors) {
      const item = el("div", null, e.past ? "error past" : "error");
      const head = el("p", "run " + e.run_id + ", task " + e.task + ", " + (e.finished_at || "") + " ");
      if (e.finished_at) head.appendChild(clock("ago", e.finished_at, "("));
      head.appendChild(document.createTextNode((e.finished_at ? ")" : "") + (e.past ? " · before a later successful run" : "")));
      item.appendChild(head);
      item.appendChild(el("p", e.cause || "", "cause-line"));
      item.appendChild(folded("full trace", e.error || ""));
      frag.appendChild(item);
    }
    return frag;
  }

  function runsTable(runs) {
    const frag = document.createDocumentFragment();
    section(frag, "Last runs");
    const rt = el("table");
    const rh = el("tr");
    ["run", "task", "pool", "state", "records", "duration s", "time breakdown", "started", "finished"].forEach(
      (h) => rh.appendChild(el("th", h)));
    rt.appendChild(rh);
    for (const r of runs) {
      const tr = el("tr");
      const stats = r.stats && typeof r.stats === "object" ? r.stats : {};
      tr.appendChild(el("td", r.run_id));
      tr.appendChild(el("td", r.task));
      tr.appendChild(el("td", r.pool || ""));
      tr.appendChild(stateEl("td", r.state));
      tr.appendChild(el("td", num(stats.rows) === null ? "" : stats.rows, "num"));
      tr.appendChild(el("td", r.duration_s === null || r.duration_s === undefined ? "" : r.duration_s, "num"));
      tr.appendChild(el("td", breakdown(stats), "times"));
      tr.appendChild(el("td", r.started_at || ""));
      tr.appendChild(el("td", r.finished_at || ""));
      rt.appendChild(tr);
    }
    frag.appendChild(rt);
    return frag;
  }

  /** Fills the details row from the row's data; with `fetchHistory`, reads the traces, the error
   * history and the last runs once (on opening). */
  async function fillDetail(entry, fetchHistory) {
    const c = entry.data;
    const td = entry.detail.firstChild;
    if (!td.querySelector(".tasks")) {
      td.replaceChildren(el("div", null, "top"), el("div", null, "schema"), el("div", null, "snapshot"),
        el("div", null, "tables"), el("div", null, "tasks"), el("div", null, "errors"), el("div", null, "runs"));
    }
    td.querySelector(".top").replaceChildren(causeBox(c));
    td.querySelector(".snapshot").replaceChildren(snapshotBox(c));
    td.querySelector(".tables").replaceChildren(tablesBox(c));
    td.querySelector(".tasks").replaceChildren(tasksTable(c, entry.traces));
    if (!fetchHistory) return;
    const errorsBox = td.querySelector(".errors");
    const runsBox = td.querySelector(".runs");
    const p = "connectors/" + encodeURIComponent(c.name);
    try {
      const q = "?connector=" + encodeURIComponent(c.name);
      const [errors, runs, status, schemas] = await Promise.all([
        fetch(new URL("errors.json" + q, SELF), { credentials: "same-origin" }).then((r) => (r.ok ? r.json() : [])),
        call("GET", p + "/runs?limit=10").then((r) => r.json()),
        call("GET", p + "/status").then((r) => r.json()),
        call("GET", p + "/schemas").then((r) => r.json()).catch(() => ({})),
      ]);
      entry.traces = {};
      for (const t of status.tasks || []) if (t.trace) entry.traces[t.id] = String(t.trace);
      if (!entry.detail) return;  // closed meanwhile
      td.querySelector(".tasks").replaceChildren(tasksTable(entry.data, entry.traces));
      td.querySelector(".schema").replaceChildren(schemaBox(schemas));
      errorsBox.replaceChildren(errorsList(errors));
      runsBox.replaceChildren(runsTable(runs));
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
    tr.dataset.detailOf = name;
    const td = el("td");
    td.colSpan = 12;
    tr.appendChild(td);
    entry.detail = tr;
    entry.tr.after(tr);
    fillDetail(entry, true);
  }
"""
