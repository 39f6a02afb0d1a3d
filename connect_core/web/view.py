"""The "Connect" view: Spark pools, connectors, tasks, states, positions/offsets and last runs, as one HTML page.

A plain FastAPI app (no Airflow import); the Airflow plugin mounts it under
`/connect-ui` and links it into the UI's navigation. Config values are never
shown, only what the runtime tracks; traces are masked like everywhere else.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse, JSONResponse

from connect_core.runtime.cluster.spark_connect import pool_kind, public_master
from connect_core.runtime.context import Runtime
from connect_core.runtime.security import mask_text

__all__ = ["create_view_app", "overview", "pools_overview"]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1f2937}
h1{font-size:1.4rem} h2{font-size:1.1rem;margin-top:1.6rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.9rem}
th,td{border:1px solid #d1d5db;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f3f4f6} code{font-size:.85rem}
.RUNNING,.SUCCEEDED{color:#047857}.FAILED,.FENCED{color:#b91c1c}.PAUSED,.STOPPED,.UNASSIGNED,.ABANDONED{color:#92400e}
"""


def overview(runtime: Runtime) -> list[dict[str, Any]]:
    """Everything the view shows, as data (also served as JSON)."""
    connectors = []
    for name in runtime.connectors.names():
        status = runtime.connectors.status(name)
        positions = [
            {"partition": dict(p.partition), "offset": dict(p.offset)}
            for p in runtime.connectors.positions(name).values()
        ]
        offsets = [
            {"topic": tp.topic, "partition": tp.partition, "offset": c.offset}
            for tp, c in sorted(runtime.connectors.sink_offsets(name).items())
        ]
        connectors.append(
            {
                "name": name,
                "type": status.type,
                "state": status.state,
                "tasks": [
                    {"id": t.id, "state": t.state, "worker_id": t.worker_id, "trace": mask_text(t.trace or "") or None}
                    for t in status.tasks
                ],
                "positions": positions if status.type == "source" else offsets,
                "runs": [
                    {**r, "error": mask_text(r["error"]) if r["error"] else None}
                    for r in runtime.connectors.last_runs(name, limit=5)
                ],
            }
        )
    return connectors


def pools_overview(runtime: Runtime) -> list[dict[str, Any]]:
    """Spark pools with their health and what each runs (no Spark conf: it may hold credentials)."""
    running = runtime.pools.running()
    return [
        {
            "name": p.name,
            "kind": pool_kind(p.master),
            "master": public_master(p.master),
            "capacity": p.capacity,
            "alive": p.alive,
            "seconds_since_heartbeat": round(p.seconds_since_heartbeat, 1),
            "probe": p.probe,
            "running": running.get(p.name, []),
        }
        for p in runtime.pools.list(runtime.settings.heartbeat_timeout)
    ]


def _cell(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else json.dumps(value, default=str))


def _page(connectors: list[dict[str, Any]], pools: list[dict[str, Any]]) -> str:
    parts = [f"<!doctype html><html><head><title>Connect</title><style>{_STYLE}</style></head><body>"]
    parts.append(f"<h1>Connect: {len(connectors)} connector(s) on {len(pools)} Spark pool(s)</h1>")
    parts.append(
        "<h2>Spark pools</h2><table><tr><th>pool</th><th>master</th><th>capacity</th><th>health</th>"
        "<th>last heartbeat s</th><th>probe</th><th>runs</th></tr>"
    )
    for p in pools:
        health = '<span class="RUNNING">alive</span>' if p["alive"] else '<span class="FAILED">DEAD</span>'
        probe = p["probe"]
        said = "" if not probe else ("ok" if probe.get("ok") else _cell(str(probe.get("error", "failed"))))
        parts.append(
            f"<tr><td>{_cell(p['name'])}</td><td><code>{_cell(p['master'])}</code></td><td>{p['capacity']}</td>"
            f"<td>{health}</td><td>{p['seconds_since_heartbeat']}</td><td>{said}</td>"
            f"<td>{_cell(', '.join(p['running']))}</td></tr>"
        )
    parts.append("</table>")
    parts.append("<table><tr><th>connector</th><th>type</th><th>state</th><th>tasks</th><th>DAG</th></tr>")
    for c in connectors:
        tasks = ", ".join(f'<span class="{t["state"]}">{t["id"]}: {t["state"]}</span>' for t in c["tasks"])
        dag = html.escape("connect__" + c["name"])
        parts.append(
            f'<tr><td><a href="#{_cell(c["name"])}">{_cell(c["name"])}</a></td><td>{c["type"].upper()}</td>'
            f'<td class="{c["state"]}">{c["state"]}</td><td>{tasks}</td><td><code>{dag}</code></td></tr>'
        )
    parts.append("</table>")
    for c in connectors:
        parts.append(f'<h2 id="{_cell(c["name"])}">{_cell(c["name"])}</h2>')
        label = "positions" if c["type"] == "source" else "offsets"
        parts.append(f"<p><b>{label}</b>: " + (", ".join(_cell(p) for p in c["positions"]) or "none yet") + "</p>")
        for t in c["tasks"]:
            if t["trace"]:
                parts.append(f"<p>task {t['id']} failed:</p><pre>{html.escape(t['trace'][-2000:])}</pre>")
        parts.append(
            "<table><tr><th>run</th><th>task</th><th>pool</th><th>state</th><th>records</th><th>work s</th>"
            "<th>duration s</th><th>started</th><th>finished</th></tr>"
        )
        for r in c["runs"]:
            parts.append(
                f"<tr><td>{r['run_id']}</td><td>{r['task']}</td><td>{_cell(r['pool'] or '')}</td>"
                f'<td class="{r["state"]}">{r["state"]}</td>'
                f"<td>{r['stats'].get('rows', '')}</td><td>{r['stats'].get('work_s', '')}</td>"
                f"<td>{'' if r['duration_s'] is None else r['duration_s']}</td>"
                f"<td>{_cell(r['started_at'] or '')}</td><td>{_cell(r['finished_at'] or '')}</td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)


def create_view_app(runtime: Callable[[], Runtime], *, auth: Sequence[Callable[..., Any]] = ()) -> FastAPI:
    """The view app; `runtime` is called once, at the first request (not at import)."""
    app = FastAPI(
        title="Connect view",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=[Depends(a) for a in auth],
    )
    holder: dict[str, Runtime] = {}

    def rt() -> Runtime:
        if "rt" not in holder:
            holder["rt"] = runtime()
        return holder["rt"]

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return _page(overview(rt()), pools_overview(rt()))

    @app.get("/overview.json")
    def data() -> JSONResponse:
        return JSONResponse(overview(rt()))

    @app.get("/pools.json")
    def pools() -> JSONResponse:
        return JSONResponse(pools_overview(rt()))

    return app
