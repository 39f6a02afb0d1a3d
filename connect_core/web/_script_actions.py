"""The second half of the Connect view's script (`_assets.SCRIPT`): rendering the poll's document,
the actions through the REST app, a connector's details and the page's event handlers. It closes
the function scope `_script_rows` opens: the halves are served as one file, never apart."""

from __future__ import annotations

__all__ = ["ACTIONS_SCRIPT"]

ACTIONS_SCRIPT = r"""
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
