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

from connect_core.web._script_actions import ACTIONS_SCRIPT
from connect_core.web._script_rows import ROWS_SCRIPT

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

#: The script, kept in two modules by what its parts do (see each).
SCRIPT = ROWS_SCRIPT + ACTIONS_SCRIPT
