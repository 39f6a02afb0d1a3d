"""The last part of the Connect view's script (`_assets.SCRIPT`): rendering the poll's document,
the actions through the REST app with their in-page confirmation, the clock and the page's event
handlers. It closes the function scope `_script_rows` opens: the parts are served as one file.

The confirmation is a `<dialog>` of the page's own, not `window.confirm()`: Airflow shows the view
in a sandboxed iframe without `allow-modals`, where `confirm()` returns false at once, unseen."""

from __future__ import annotations

__all__ = ["ACTIONS_SCRIPT"]

ACTIONS_SCRIPT = r"""
  function render(data) {
    const connectors = data.connectors;
    const unplaced = connectors.filter((c) => !c.pools.length).length;
    title.textContent = "Connect: " + connectors.length + " connector(s) on " + data.pools.length + " Spark pool(s)" +
      (unplaced ? " (" + unplaced + " not placed on any yet)" : "");
    renderPools(data.pools);
    const seen = new Set();
    const names = [];
    let reordered = connectors.length !== order.length;
    connectors.forEach((c, i) => {
      const name = String(c.name);
      seen.add(name);
      names.push(name);
      if (!reordered && order[i] !== name) reordered = true;
      let entry = rows.get(name);
      if (!entry) {
        const tr = el("tr");
        tr.dataset.name = name;
        entry = { tr: tr, sig: "", data: c, detail: null, queued: null, traces: null };
        rows.set(name, entry);
        onScreen.observe(tr);
      }
      entry.data = c;
      draw(entry);
    });
    for (const [name, entry] of rows) {
      if (!seen.has(name)) {
        onScreen.unobserve(entry.tr);
        visibleRows.delete(entry);
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

  /** Redraws a row whose data (or "queued") changed; not while its "More…" list is open in the operator's hand. */
  function draw(entry) {
    const isQueued = queued(entry, entry.data);
    const sig = JSON.stringify(entry.data) + (isQueued ? "|queued" : "");
    if (entry.sig === sig) return;
    const focused = document.activeElement;
    if (focused && focused.tagName === "SELECT" && entry.tr.contains(focused)) return;  // the next poll or tick redraws it
    entry.tr.replaceChildren(...cells(entry.data, isQueued));
    entry.tr.dataset.state = String(entry.data.state);
    entry.sig = sig;
  }

  async function refresh() {
    if (inFlight) return;
    inFlight = true;
    try {
      const res = await fetch(new URL("data.json", SELF), { credentials: "same-origin", cache: "no-store" });
      if (!res.ok) throw new Error(res.status === 401 || res.status === 403 ? "not signed in (" + res.status + ")" : "HTTP " + res.status);
      polls += 1;
      render(await res.json());
      followQueued();
      document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    } catch (e) {
      say("could not refresh: " + e.message, true);
    } finally {
      inFlight = false;
    }
  }

  async function call(method, path, body) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(new URL(path, REST), {
      method: method,
      credentials: "same-origin",
      headers: headers,
      body: body === undefined ? undefined : JSON.stringify(body),
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

  /** Asks Airflow how the runs "Run now" started are doing, for the rows still "queued" (a few at most). */
  async function followQueued() {
    if (!AIRFLOW) return;
    for (const entry of rows.values()) {
      const q = entry.queued;
      if (!q || !q.dagRun || q.ended || q.asking) continue;
      q.asking = true;
      try {
        const path = "dags/" + encodeURIComponent(q.dagRun.dag_id) + "/dagRuns/" + encodeURIComponent(q.dagRun.run_id);
        const res = await fetch(new URL(path, AIRFLOW), { credentials: "same-origin", headers: { Accept: "application/json" } });
        const run = res.ok ? await res.json() : null;
        if (run && ["success", "failed"].includes(run.state)) {
          q.ended = run.state;
          q.endedPoll = polls;  // a Connect run committed before this shows in the next poll, if there was one
        }
      } catch (_) { /* Airflow not there: the timeout ends "queued" */ } finally {
        q.asking = false;
      }
    }
  }

  // The in-page confirmation: one <dialog>, its question and its two buttons set per use.
  const dialog = el("dialog", null, "confirm");
  dialog.setAttribute("aria-labelledby", "confirm-question");
  const question = el("p");
  question.id = "confirm-question";
  const confirmButton = el("button", "Confirm", "danger");
  confirmButton.type = "button";
  confirmButton.value = "confirm";
  const cancelButton = el("button", "Cancel");
  cancelButton.type = "button";
  cancelButton.value = "cancel";
  const dialogButtons = el("div", null, "buttons");
  dialogButtons.append(confirmButton, cancelButton);
  // What an action asks for besides a yes (the tables to snapshot): shown only when it asks.
  const answerInput = el("input", null, "answer");
  answerInput.type = "text";
  answerInput.id = "confirm-answer";
  answerInput.setAttribute("aria-labelledby", "confirm-question");
  answerInput.maxLength = 4000;
  answerInput.hidden = true;
  dialog.append(question, answerInput, dialogButtons);
  body.appendChild(dialog);
  let answer = null;

  /** Resolves true when the operator confirms, false on Cancel or Escape. With `input` (a
   * placeholder), the dialog also asks for a line of text: read it from `answerInput`. */
  function confirmInPage(text, confirmLabel, input) {
    if (answer) answer(false);  // a question still open is cancelled by a new one
    question.textContent = text;
    confirmButton.textContent = confirmLabel;
    answerInput.hidden = !input;
    answerInput.value = "";
    answerInput.placeholder = input || "";
    dialog.showModal();
    if (input) answerInput.focus();  // Enter in it confirms: it is what the operator typed
    else cancelButton.focus();  // Enter on a stray key press cancels, never confirms
    return new Promise((resolve) => { answer = resolve; });
  }

  answerInput.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault();
      closeDialog(true);
    }
  });

  function closeDialog(confirmed) {
    if (dialog.open) dialog.close();
    const resolve = answer;
    answer = null;
    if (resolve) resolve(confirmed);
  }

  confirmButton.addEventListener("click", () => closeDialog(true));
  cancelButton.addEventListener("click", () => closeDialog(false));
  dialog.addEventListener("close", () => closeDialog(false));  // Escape

  /** What each action asks, and the REST calls it makes; null: unknown action. */
  function plan(name, action, state, topic) {
    const p = "connectors/" + encodeURIComponent(name);
    switch (action) {
      case "pause": return { steps: [["PUT", p + "/pause"]], done: "paused" };
      case "resume": return { steps: [["PUT", p + "/resume"]], done: "resumed" };
      case "trigger": return { steps: [["POST", p + "/trigger"]], done: "run asked for (queued in Airflow)" };
      case "schema-accept": return { ask: "Accept the schema change " + name + " paused on" +
        (topic ? " (topic " + topic + ")" : "") + "? Its next run lets it through to the target.", label: "Accept",
        steps: [["POST", p + "/schemas/accept", topic ? { topics: [topic] } : undefined]], done: "schema change accepted" };
      case "restart-failed": return { ask: "Restart the failed tasks of " + name + "?", label: "Restart failed",
        steps: [["POST", p + "/restart?includeTasks=true&onlyFailed=true"]], done: "failed tasks restarted" };
      case "restart-all": return { ask: "Restart all tasks of " + name + "?", label: "Restart all",
        steps: [["POST", p + "/restart?includeTasks=true&onlyFailed=false"]], done: "restarted" };
      case "stop": return { ask: "Stop " + name + "? It runs no more until started again; its config and offsets stay.",
        label: "Stop", steps: [["PUT", p + "/stop"]], done: "stopped" };
      case "reset":
        return state !== "STOPPED"
          ? { ask: "Stop " + name + " and reset its offsets? Its next run starts over from the beginning.",
              label: "Stop and reset", steps: [["PUT", p + "/stop"], ["DELETE", p + "/offsets"]],
              done: "stopped, offsets reset (start it to run again)" }
          : { ask: "Reset the offsets of " + name + "? Its next run starts over from the beginning.",
              label: "Reset offsets", steps: [["DELETE", p + "/offsets"]], done: "offsets reset (start it to run again)" };
      case "snapshot-pause": return { steps: [signal(p, "pause-snapshot")],
        done: "snapshot pause asked for (the next run takes it)" };
      case "snapshot-resume": return { steps: [signal(p, "resume-snapshot")],
        done: "snapshot resume asked for (the next run takes it)" };
      case "snapshot-stop": return { ask: "Stop the incremental snapshot of " + name + "? The rows it has not read " +
        "yet are not read; the tables queued after it are dropped. Its changes keep streaming.", label: "Stop snapshot",
        steps: [signal(p, "stop-snapshot")], done: "snapshot stop asked for (the next run takes it)" };
      case "snapshot-start": return { ask: "Snapshot which tables of " + name + "? Their rows are read again, in " +
        "chunks, while the changes keep streaming. Name them as schema.table, separated by commas or spaces.",
        label: "Snapshot", input: "public.items, public.orders",
        steps: (tables) => [signal(p, "execute-snapshot", { "data-collections": tables })],
        done: (tables) => "snapshot of " + tables.join(", ") + " asked for (the next run starts it)" };
      default: return null;
    }
  }

  /** A Debezium signal, sent over the REST channel (`POST /connectors/{name}/signals`). */
  function signal(path, type, data) {
    return ["POST", path + "/signals", { type: type, data: Object.assign({ type: "incremental" }, data || {}) }];
  }

  async function act(name, action, topic) {
    const entry = rows.get(name);
    const todo = plan(name, action, entry.data.state, topic);
    if (!todo) return;
    if (todo.ask && !(await confirmInPage(todo.ask, todo.label, todo.input))) {
      say(action + " " + name + ": cancelled", false);
      return;
    }
    if (todo.input) {  // the steps and what is said once done follow from the answer
      const words = answerInput.value.split(/[\s,]+/).filter((w) => w);
      if (!words.length) {
        say(name + ": " + action + ": no table named", true);
        return;
      }
      todo.steps = todo.steps(words);
      todo.done = todo.done(words);
    }
    say(action + " " + name + "…", false);
    try {
      let res = null;
      for (const [method, path, body] of todo.steps) res = await call(method, path, body);
      if (action === "trigger") {  // the row says "queued" by the time the line says it was asked for
        const started = await res.json().catch(() => ({}));
        const dagRun = started.dag_run_id ? { dag_id: String(started.dag_id), run_id: String(started.dag_run_id) } : null;
        entry.queued = { at: Date.now(), after: newestRun(entry.data), dagRun: dagRun, ended: null, endedPoll: 0 };
        draw(entry);
      }
      if (action === "schema-accept") {
        const answer = await res.clone().json().catch(() => ({}));
        todo.done += answer.resumed ? ", resumed" : " (the connector was not paused: its state is unchanged)";
      }
      const warning = res && res.headers.get("Connect-Warning");  // done, but Airflow's DAG not updated
      say(name + ": " + todo.done + (warning ? " (warning: its DAG was not updated: " + warning + ")" : ""), !!warning);
      if (entry.detail && (action === "schema-accept" || action === "reset")) fillDetail(entry, true);
    } catch (e) {
      say(name + ": " + action + " failed: " + e.message, true);
    }
    await refresh();
  }

  // The clock: the relative times of the rows on screen, every second, from their ISO times.
  const visibleRows = new Set();
  const onScreen = new IntersectionObserver((seen) => {
    for (const s of seen) {
      const entry = rows.get(s.target.dataset.name);
      if (!entry || entry.tr !== s.target) continue;
      if (s.isIntersecting) visibleRows.add(entry); else visibleRows.delete(entry);
    }
  });

  function retell(root) {
    for (const e of root.querySelectorAll("[data-clock]")) {
      const text = clockText(e);
      if (e.textContent !== text) e.textContent = text;
    }
  }

  function tick() {
    if (document.hidden) return;
    for (const entry of visibleRows) {
      if (entry.queued) draw(entry);  // "queued" may have ended (a timeout, Airflow's run skipped)
      retell(entry.tr);
      if (entry.detail) retell(entry.detail);
    }
  }

  tbody.addEventListener("click", (event) => {
    const b = event.target.closest("button[data-action]");
    if (!b) return;
    const tr = b.closest("tr[data-name]") || b.closest("tr[data-detail-of]");  // a row, or its details
    if (!tr) return;
    const name = tr.dataset.name || tr.dataset.detailOf;
    if (b.dataset.action === "details") toggleDetail(name);
    else act(name, b.dataset.action, b.closest("[data-topic]") ? b.closest("[data-topic]").dataset.topic : undefined);
  });

  tbody.addEventListener("change", (event) => {
    const s = event.target.closest("select[data-action='more']");
    if (!s || !s.value) return;
    const action = s.value;
    s.value = "";
    s.blur();  // the row may redraw again
    act(s.closest("tr[data-name]").dataset.name, action);
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
  setInterval(tick, 1000);
})();
"""
