"""The "Connect" view: every connector's state, lag, throughput, errors and pool, with the actions to run it.

A plain FastAPI app (no Airflow import); the Airflow plugin mounts it under `/connect-ui` and
links it into the UI's navigation, next to the REST app under `/connect`. The page is a shell
and a script (`_assets`): it polls `data.json` (one document for every connector, built in a
few set-based queries: `_data`) and acts through the REST app's own routes, so an action in
the view is exactly the API call, with the same auth. Config values are never shown, only what
the runtime tracks; errors and traces are masked like everywhere else.

`rest_base` is where the REST app answers, relative to the view's own URL: `../connect` when
both are mounted in Airflow (the default), e.g. `/connect` when they are served elsewhere.
`dag_base` is where Airflow's UI shows a DAG (`../dags/`); None hides the DAG links. `airflow_api`
is Airflow's REST API (`../api/v2/`), where the page follows a run it asked for until a Connect run
shows (or Airflow's run ended without one: skipped); None: the page only waits, up to a timeout.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from html import escape
from typing import Any
from urllib.parse import urlsplit

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.middleware.gzip import GZipMiddleware

from connect_core.runtime.context import Runtime
from connect_core.runtime.security.roles import Role
from connect_core.runtime.store import views
from connect_core.web._assets import SCRIPT, STYLE
from connect_core.web._data import connectors_view, failed_runs, pools_view, view_document

__all__ = ["create_view_app", "overview", "pools_overview"]


def overview(runtime: Runtime) -> list[dict[str, Any]]:
    """Every connector as the view lists it (also served as JSON): a few queries, not some per connector."""
    return connectors_view(runtime)


def pools_overview(runtime: Runtime, *, names: bool = True) -> list[dict[str, Any]]:
    """Spark pools with their health, how many connectors and tasks each holds and, with `names`,
    which (no Spark conf: it may hold credentials). See `_data.pools_view`."""
    return pools_view(runtime, views.pool_load(runtime.engine), runtime.pools.running() if names else None)


def _embedded_json(value: Any) -> str:
    """JSON to put inside a `<script type="application/json">`: no `<`, `>` or `&` left to end the
    element or open a comment, whatever the data holds (JSON.parse reads the escapes back)."""
    return json.dumps(value, default=str).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _csp(rest_base: str) -> str:
    """Only the view's own script and style run; fetches go to this origin (or the REST app's, if elsewhere)."""
    connect = "'self'"
    parts = urlsplit(rest_base)
    if parts.scheme in ("http", "https") and parts.netloc:
        connect += f" {parts.scheme}://{parts.netloc}"
    return (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src {connect}; base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
    )


def _page(
    data: dict[str, Any],
    *,
    root: str,
    rest_base: str,
    dag_base: str | None,
    airflow_api: str | None,
    poll_ms: int,
    role: Role,
) -> str:
    count, pools = len(data["connectors"]), len(data["pools"])
    attrs = {
        "self": root + "/",
        "rest": rest_base,
        "dags": dag_base or "",
        "airflow": airflow_api or "",
        "poll": str(poll_ms),
        "role": role.name,
    }
    body_attrs = " ".join(f'data-{k}="{escape(v, quote=True)}"' for k, v in attrs.items())
    state_options = "".join(
        f'<option value="{v}">{label}</option>'
        for v, label in (
            ("", "any state"),
            ("RUNNING", "RUNNING"),
            ("PAUSED", "PAUSED"),
            ("STOPPED", "STOPPED"),
            ("FAILED", "FAILED"),
            ("UNASSIGNED", "UNASSIGNED"),
            ("TASK_FAILED", "a task FAILED"),
            ("LAGGING", "sinks behind (lag > 0)"),
        )
    )
    columns = (
        ("connector", "open the details: the error's cause, a sink's tables, tasks, error history, last runs"),
        ("type", ""),
        ("state", "what the connector does now; its state as the REST API says it on hover"),
        ("tasks", ""),
        ("lag", "records behind: what a sink's topics hold that it has not committed"),
        ("records per run", ""),
        ("last run", "hover for its time breakdown"),
        ("schedule", "what the connector's DAG runs on"),
        ("pool", ""),
        ("last error", "the cause, on one line; the trace is in the details"),
        ("links", ""),
        ("actions", "Run now, Pause/Resume/Start; the rest under More…, each asking to confirm"),
    )
    pool_columns = (
        "pool",
        "kind",
        "master",
        "capacity",
        "health",
        "last heartbeat",
        "probe",
        "connectors placed",
        "tasks placed",
    )
    root_attr = escape(root, quote=True)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Connect</title>'
        f'<link rel="stylesheet" href="{root_attr}/view.css"></head><body {body_attrs}>'
        f'<h1 id="title">Connect: {count} connector(s) on {pools} Spark pool(s)</h1>'
        '<h2>Spark pools</h2><table id="pools"><thead><tr>'
        + "".join(f"<th>{c}</th>" for c in pool_columns)
        + "</tr></thead><tbody></tbody></table>"
        '<h2>Connectors</h2><div class="bar">'
        '<input id="search" type="search" placeholder="search connectors by name" aria-label="search connectors">'
        f'<select id="state" aria-label="filter by state">{state_options}</select>'
        '<span id="shown"></span><span id="updated"></span><span id="status" role="status"></span></div>'
        '<table id="connectors"><thead><tr>'
        + "".join(f'<th title="{hint}">{c}</th>' if hint else f"<th>{c}</th>" for c, hint in columns)
        + "</tr></thead><tbody></tbody></table>"
        f'<script type="application/json" id="initial">{_embedded_json(data)}</script>'
        f'<script src="{root_attr}/view.js" defer></script>'
        "<noscript>The Connect view needs JavaScript; the same data is at data.json.</noscript>"
        "</body></html>"
    )


def create_view_app(
    runtime: Callable[[], Runtime],
    *,
    auth: Sequence[Callable[..., Any]] = (),
    rest_base: str = "../connect",
    dag_base: str | None = "../dags/",
    airflow_api: str | None = "../api/v2/",
    poll_ms: int = 5000,
) -> FastAPI:
    """The view app; `runtime` is called once, at the first request (not at import). The page reads
    its data again every `poll_ms` milliseconds (while the browser shows it)."""
    app = FastAPI(
        title="Connect view",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=[Depends(a) for a in auth],
    )
    # data.json is ~300 bytes a connector, read every few seconds: compressed it is a tenth.
    app.add_middleware(GZipMiddleware, minimum_size=2048)
    holder: dict[str, Runtime] = {}
    csp = _csp(rest_base)

    def rt() -> Runtime:
        if "rt" not in holder:
            holder["rt"] = runtime()
        return holder["rt"]

    def data() -> dict[str, Any]:
        return view_document(rt())

    @app.get("/", response_class=HTMLResponse)
    def page(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", "")).rstrip("/")
        # an auth that tells no role (an embedder's all-or-nothing check) lets its users do everything
        role = getattr(request.state, "connect_role", None) or Role.operator
        html = _page(
            data(),
            root=root,
            rest_base=rest_base,
            dag_base=dag_base,
            airflow_api=airflow_api,
            poll_ms=poll_ms,
            role=role,
        )
        headers = {"Content-Security-Policy": csp, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
        return HTMLResponse(html, headers=headers)

    @app.get("/data.json")
    def page_data() -> JSONResponse:
        return JSONResponse(data(), headers={"Cache-Control": "no-store"})

    @app.get("/errors.json")
    def errors(connector: str, limit: int = Query(10, ge=1, le=100)) -> JSONResponse:
        return JSONResponse(failed_runs(rt(), connector, limit), headers={"Cache-Control": "no-store"})

    @app.get("/overview.json")
    def connectors() -> JSONResponse:
        return JSONResponse(overview(rt()))

    @app.get("/pools.json")
    def pools() -> JSONResponse:
        return JSONResponse(pools_overview(rt()))

    @app.get("/view.js")
    def script() -> Response:
        return Response(SCRIPT, media_type="text/javascript", headers={"X-Content-Type-Options": "nosniff"})

    @app.get("/view.css")
    def style() -> Response:
        return Response(STYLE, media_type="text/css", headers={"X-Content-Type-Options": "nosniff"})

    return app
