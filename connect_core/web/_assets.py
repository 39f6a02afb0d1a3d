"""The Connect view's script and style sheet, served by the view app as `view.js` and `view.css`.

Kept as Python strings, not package data files: they ship with the package however it is
installed (a wheel, an editable install, the Docker image's copy of the tree).

The script builds every element with `createElement` and puts data in with `textContent`,
`dataset` and `setAttribute` of numbers only, never `innerHTML`: connector names stored before
the naming rule, errors and traces are shown as text whatever they hold. The page's
Content-Security-Policy allows only these two files, so even a slip would run no injected script.
It acts through the REST app's own routes (same origin, same auth: Airflow's session cookie
inside Airflow), polls one JSON document of the view for every connector, and touches only the
rows whose data changed: 1,000 connectors stay responsive. Between polls, a clock re-renders the
relative times of the rows on screen only; the actions that change a connector for good ask in a
`<dialog>` of the page (Airflow's sandboxed iframe ignores `window.confirm()`).
"""

from __future__ import annotations

from connect_core.web._script_actions import ACTIONS_SCRIPT
from connect_core.web._script_details import DETAILS_SCRIPT
from connect_core.web._script_rows import ROWS_SCRIPT

__all__ = ["SCRIPT", "STYLE"]

STYLE = """
body{font-family:system-ui,sans-serif;margin:.8rem;color:#1f2937;font-size:14px}
h1{font-size:1.35rem;margin:.2rem 0 .8rem} h2{font-size:1.05rem;margin:1.2rem 0 .4rem}
table{border-collapse:collapse;margin:.3rem 0 1rem}
th,td{border:1px solid #d1d5db;padding:.25rem .4rem;text-align:left;vertical-align:top}
th{background:#f3f4f6;position:sticky;top:0;z-index:1}
code,pre{font-size:.8rem} pre{white-space:pre-wrap;max-width:70rem;margin:.2rem 0;background:#f9fafb;padding:.3rem}
.bar{display:flex;gap:.6rem;align-items:center;margin:.4rem 0;flex-wrap:wrap}
.bar input{min-width:18rem;padding:.25rem}
#status{color:#374151}#status.error{color:#b91c1c;font-weight:600}
[data-state=RUNNING],[data-state=SUCCEEDED]{color:#047857}
[data-state=FAILED],[data-state=FENCED],[data-state=DEAD]{color:#b91c1c;font-weight:600}
[data-state=PAUSED],[data-state=STOPPED],[data-state=UNASSIGNED],[data-state=ABANDONED]{color:#92400e}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.state[data-flag=task-failed],td.state[data-flag=task-failed] *{color:#b91c1c;font-weight:600}
td[data-activity=queued]{color:#1d4ed8} td[data-activity=running]{color:#047857;font-weight:600}
td.err{max-width:15rem;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;color:#b91c1c}
td.err.past,.past{color:#6b7280;font-weight:400}
td.actions{white-space:nowrap}
button,select.more{font-size:.75rem;margin:0 .15rem .15rem 0;padding:.1rem .35rem;cursor:pointer}
select.more{width:5.6rem}
button.danger{border-color:#b91c1c;color:#b91c1c}
dialog.confirm{border:1px solid #9ca3af;border-radius:.4rem;padding:1rem 1.2rem;max-width:32rem}
dialog.confirm::backdrop{background:rgba(17,24,39,.35)}
dialog.confirm p{margin:0 0 .8rem} dialog.confirm button{font-size:.85rem;padding:.25rem .7rem}
dialog.confirm input.answer{box-sizing:border-box;width:100%;margin:0 0 .8rem;padding:.3rem;font-size:.9rem}
td.state .snap{color:#1d4ed8;font-weight:400} p.snapshot-progress{margin:.3rem 0}
.muted{color:#6b7280} .cause{margin:.3rem 0} .cause strong{color:#b91c1c} .cause.past strong{color:#6b7280}
.written{margin:.3rem 0} .cause-line{margin:.1rem 0;font-weight:600} div.error{margin:.2rem 0 .6rem} td.times{font-size:.8rem}
summary{cursor:pointer;color:#1d4ed8;font-size:.8rem}
div.schema-change{margin:.2rem 0 .6rem} pre.diff{margin:.2rem 0;font-size:.85rem}
button.linkish{text-align:left;border:0;background:none;color:#1d4ed8;text-decoration:underline;padding:0;font-size:inherit}
td.spark{white-space:nowrap} svg.spark{vertical-align:middle}
svg.spark polyline{fill:none;stroke:#2563eb;stroke-width:1.5}
svg.spark circle.failed{fill:#b91c1c} svg.spark line{stroke:#d1d5db}
tr.detail>td{background:#fbfbfd}
tr.detail>td>div{max-width:calc(100vw - 5rem);overflow-wrap:anywhere}
tr.detail table td{max-width:60rem}
"""

#: The script, kept in three modules by what its parts do (see each).
SCRIPT = ROWS_SCRIPT + DETAILS_SCRIPT + ACTIONS_SCRIPT
