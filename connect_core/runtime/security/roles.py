"""Who may do what over REST: three roles, each route's role, and the rule that judges a request.

* `viewer`: reads (connectors, status, offsets, runs, pools, topics and their schemas, metrics;
  configs are masked).
* `connector`: the viewer's reads, and what a team does with its own connectors: create, update,
  delete, pause, resume, stop, restart, run now, validate.
* `operator`: everything, and what touches the whole worker or other teams' data: Spark pools and
  their conf, the rebalance, topic deletion, retention and configs, offsets resets and changes,
  plugin reloads, stop/pause/resume of every connector at once.

Every route of the REST app is on `ROUTE_ROLES` (a test checks it): a route added without a
decision is refused to all but operators. Kafka's REST extensions and Airflow's auth managers
decide the same way, per action; the Airflow plugin maps its users' Airflow permissions onto these
roles (`connect_core.airflow.roles`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = ["QUERY_WRITES", "ROUTE_ROLES", "Role", "required_role"]


class Role(enum.IntEnum):
    """Ordered: a role may do what the roles below it may."""

    viewer = 1
    connector = 2
    operator = 3

    def allows(self, needed: Role) -> bool:
        return self >= needed


V, C, OP = Role.viewer, Role.connector, Role.operator

#: (method, route path) -> the least role that may call it. RocketMQ's routes are listed once and
#: hold under `/rocketmq` too.
ROUTE_ROLES: Mapping[tuple[str, str], Role] = {
    # the API's own description
    ("GET", "/openapi.json"): V,
    ("GET", "/docs"): V,
    ("GET", "/"): V,
    ("GET", "/health"): V,
    ("GET", "/metrics"): V,
    # connectors (Kafka Connect)
    ("GET", "/connectors"): V,
    ("POST", "/connectors"): C,
    ("GET", "/connectors/{connector}"): V,
    ("GET", "/connectors/{connector}/config"): V,
    ("PUT", "/connectors/{connector}/config"): C,
    ("PATCH", "/connectors/{connector}/config"): C,
    ("PUT", "/connectors/{connector}/apply"): C,
    ("DELETE", "/connectors/{connector}"): C,
    ("GET", "/connectors/{connector}/status"): V,
    ("GET", "/connectors/{connector}/tasks"): V,
    ("GET", "/connectors/{connector}/tasks/{task}/status"): V,
    ("POST", "/connectors/{connector}/tasks/{task}/restart"): C,
    ("POST", "/connectors/{connector}/restart"): C,
    ("PUT", "/connectors/{connector}/pause"): C,
    ("PUT", "/connectors/{connector}/resume"): C,
    ("PUT", "/connectors/{connector}/stop"): C,
    ("POST", "/connectors/{connector}/trigger"): C,
    ("GET", "/connectors/{connector}/runs"): V,
    ("GET", "/connectors/{connector}/topics"): V,
    ("PUT", "/connectors/{connector}/topics/reset"): C,
    ("GET", "/connectors/{connector}/offsets"): V,
    ("GET", "/connectors/{connector}/schemas"): V,
    ("POST", "/connectors/{connector}/schemas/accept"): C,
    ("POST", "/connectors/{connector}/signals"): C,
    ("POST", "/connectors/{connector}/resync"): C,
    ("PATCH", "/connectors/{connector}/offsets"): OP,
    ("DELETE", "/connectors/{connector}/offsets"): OP,
    ("GET", "/connector-plugins"): V,
    ("GET", "/connector-plugins/{plugin}/config"): V,
    ("PUT", "/connector-plugins/{plugin}/config/validate"): C,
    # Spark pools and the rebalance
    ("GET", "/pools"): V,
    ("GET", "/pools/{pool}"): V,
    ("PUT", "/pools/{pool}"): OP,
    ("DELETE", "/pools/{pool}"): OP,
    ("POST", "/pools/{pool}/heartbeat"): OP,
    ("POST", "/rebalance"): OP,
    ("GET", "/rebalances"): V,
    # topics
    ("GET", "/topics"): V,
    ("GET", "/topics/{topic}"): V,
    ("PUT", "/topics/{topic}/config"): OP,
    ("DELETE", "/topics/{topic}"): OP,
    ("POST", "/topics/retention"): OP,
    # the topics' schema histories, as Confluent Schema Registry's subjects (reads only)
    ("GET", "/subjects"): V,
    ("GET", "/subjects/{subject}/versions"): V,
    ("GET", "/subjects/{subject}/versions/{version}"): V,
    ("GET", "/subjects/{subject}/versions/{version}/schema"): V,
    ("GET", "/schemas/ids/{schema_id}"): V,
    ("POST", "/subjects/{subject}"): V,  # a lookup: a read
    ("POST", "/compatibility/subjects/{subject}/versions"): V,
    ("POST", "/compatibility/subjects/{subject}/versions/{version}"): V,
    ("GET", "/config"): V,
    ("GET", "/config/{subject}"): V,
    ("GET", "/mode"): V,
    ("GET", "/mode/{subject}"): V,
    # Schema Registry's writes: refused to every role alike (read-only: the runs' commits write it)
    ("POST", "/subjects/{subject}/versions"): V,
    ("DELETE", "/subjects/{subject}"): V,
    ("DELETE", "/subjects/{subject}/versions/{version}"): V,
    ("PUT", "/config"): V,
    ("DELETE", "/config"): V,
    ("PUT", "/config/{subject}"): V,
    ("DELETE", "/config/{subject}"): V,
    ("PUT", "/mode"): V,
    ("DELETE", "/mode"): V,
    ("PUT", "/mode/{subject}"): V,
    ("DELETE", "/mode/{subject}"): V,
    # RocketMQ Connect's routes (GETs that change state among them)
    ("GET", "/getClusterInfo"): V,
    ("GET", "/connectors/list"): V,
    ("GET", "/allocated/connectors"): V,
    ("GET", "/allocated/tasks"): V,
    ("GET", "/connectors/stop/all"): OP,
    ("GET", "/connectors/pause/all"): OP,
    ("GET", "/connectors/resume/all"): OP,
    ("POST", "/connectors/{name}"): C,
    ("GET", "/connectors/{name}"): V,  # with `?config=` it creates: QUERY_WRITES
    ("GET", "/connectors/{name}/stop"): C,
    ("GET", "/connectors/{name}/pause"): C,
    ("GET", "/connectors/{name}/resume"): C,
    ("GET", "/connectors/{name}/config"): V,
    ("GET", "/connectors/{name}/status"): V,
    ("GET", "/connectors/{name}/tasks"): V,
    ("GET", "/connectors/{name}/tasks/{task}/status"): V,
    ("GET", "/plugin/reload"): OP,
    ("GET", "/plugin/list"): V,
    ("GET", "/plugin/list/connectors"): V,
    ("GET", "/plugin/config"): V,
    ("POST", "/plugin/config/validate"): C,
}

#: Routes that change state when a query parameter is present (RocketMQ's create by GET).
QUERY_WRITES: Mapping[tuple[str, str], tuple[str, Role]] = {("GET", "/connectors/{name}"): ("config", C)}

_ROCKETMQ_PREFIX = "/rocketmq"


def required_role(method: str, path: str, query: Mapping[str, str] | None = None) -> Role:
    """The least role that may call the route `path` (its template, e.g. `/pools/{pool}`) with `method`;
    operator for a route nobody classified."""
    method = method.upper()
    if method == "HEAD":
        method = "GET"
    key = (method, path)
    if key not in ROUTE_ROLES and path.startswith(_ROCKETMQ_PREFIX + "/"):
        key = (method, path.removeprefix(_ROCKETMQ_PREFIX))
    role = ROUTE_ROLES.get(key, Role.operator)
    writes = QUERY_WRITES.get(key)
    if writes and query is not None and writes[0] in query:
        role = max(role, writes[1])
    return role
