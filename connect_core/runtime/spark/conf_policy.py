"""What Spark settings a pool (or a connector) may give a run, and what masters a pool may name.

A pool's Spark conf comes from whoever may register pools (`PUT /pools/{pool}`), and reaches the
JVM of every run on it: `spark.driver.extraJavaOptions=-XX:OnOutOfMemoryError=<cmd>` runs a shell
command, `spark.jars` loads code, `spark.sql.runSQLOnFiles=true` undoes the runtime's SQL
confinement. So a pool's conf is checked against an allow-list (`ALLOWED_KEYS`,
`ALLOWED_PREFIXES`), which the operator may extend (`pool_conf_allowed_keys`,
`CONNECT_POOL_CONF_ALLOWED_KEYS`: exact keys or `prefix.*`), over a floor no setting lifts
(`forbidden_reason`): keys whose values reach a JVM or shell command line, load code or files,
set an executor's environment, or are the runtime's own safety settings (`ENFORCED_CONF`), which
every launch path applies last.

Registration refuses a conf with any refused key (all of them listed); at launch, a conf stored
before these rules has its refused keys dropped with a warning naming the keys (never the values):
a run on a pool registered long ago keeps running, and nothing refused reaches the JVM.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from connect_core.runtime.security.urls import mask_url_credentials
from connect_core.runtime.settings import Settings
from connect_core.runtime.spark.install import BASE_SPARK_CONF
from connect_core.sdk.errors import ConfigError

__all__ = [
    "ALLOWED_KEYS",
    "ALLOWED_PREFIXES",
    "ENFORCED_CONF",
    "MAX_VALUE_CHARS",
    "SparkConfPolicy",
    "check_master",
    "forbidden_reason",
]

log = logging.getLogger(__name__)

#: The runtime's own safety settings: applied after any pool's or connector's conf, on every launch
#: path (spark-submit, a warm pool's server, a Spark Connect run's session).
ENFORCED_CONF: dict[str, str] = {
    key: BASE_SPARK_CONF[key]
    for key in (
        "spark.sql.runSQLOnFiles",
        "spark.sql.variable.substitute",
        "spark.redaction.regex",
        "spark.sql.session.timeZone",
    )
}

#: Keys a pool may set: sizing, parallelism, networking, scheduling, and S3A's settings (a topic
#: store on S3 needs its endpoint and credentials; its class-loading keys are on the floor).
ALLOWED_KEYS = frozenset(
    {
        "spark.driver.memory",
        "spark.driver.memoryOverhead",
        "spark.driver.cores",
        "spark.driver.maxResultSize",
        "spark.executor.memory",
        "spark.executor.memoryOverhead",
        "spark.executor.cores",
        "spark.executor.instances",
        "spark.executor.heartbeatInterval",
        "spark.cores.max",
        "spark.task.cpus",
        "spark.task.maxFailures",
        "spark.default.parallelism",
        "spark.sql.shuffle.partitions",
        "spark.sql.autoBroadcastJoinThreshold",
        "spark.sql.files.maxPartitionBytes",
        "spark.memory.fraction",
        "spark.memory.storageFraction",
        "spark.locality.wait",
        "spark.speculation",
        "spark.network.timeout",
        "spark.driver.host",
        "spark.driver.bindAddress",
        "spark.driver.port",
        "spark.blockManager.port",
        "spark.ui.enabled",
        "spark.ui.port",
        "spark.log.level",
        "spark.yarn.queue",
        "spark.kubernetes.namespace",
        # not `spark.kubernetes.container.image`: an image is code to run (an operator may allow it)
        "spark.kubernetes.container.image.pullPolicy",
        "spark.kubernetes.driver.request.cores",
        "spark.kubernetes.driver.limit.cores",
        "spark.kubernetes.executor.request.cores",
        "spark.kubernetes.executor.limit.cores",
    }
)
ALLOWED_PREFIXES = ("spark.dynamicAllocation.", "spark.sql.adaptive.", "spark.hadoop.fs.s3a.")

#: Longest value a pool's setting may have (a JVM argument, a line of a properties file).
MAX_VALUE_CHARS = 4096
#: What a key may be made of: ASCII only (no look-alike of a refused key), no blank, no `=`.
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_ALLOWED_ENTRY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}(\.\*)?")

# -- the floor: refused whatever the operator allows (compared in lower case) --------------------
_FLOOR_KEYS = frozenset(
    {
        "spark.jars",
        "spark.files",
        "spark.archives",
        "spark.plugins",
        "spark.executor.plugins",
        "spark.extralisteners",
        "spark.sql.extensions",
        "spark.sql.queryexecutionlisteners",
        "spark.sql.streaming.streamingquerylisteners",
        "spark.sql.warehouse.dir",
        "spark.sql.catalogimplementation",
        "spark.serializer",
        "spark.shuffle.manager",
        "spark.local.dir",
        "spark.master",
        "spark.remote",
        "spark.api.mode",
        "spark.yarn.jars",
        "spark.yarn.archive",
    }
)
_ENFORCED_LOWER = frozenset(key.lower() for key in ENFORCED_CONF)
_FLOOR_PREFIXES = (
    "spark.jars.",
    "spark.files.",
    "spark.archives.",
    "spark.submit.",
    "spark.plugins.",
    "spark.redaction.",
    "spark.sql.redaction.",
    "spark.python.",
    "spark.pyspark.",
    "spark.r.",
    "spark.executorenv.",
    "spark.yarn.appmasterenv.",
    "spark.yarn.dist.",
    "spark.yarn.executor.",
    "spark.kubernetes.driverenv.",
    "spark.kubernetes.authenticate.",
    "spark.connect.",
    "spark.eventlog.",
    "spark.history.",
    "spark.driver.log.",
    "spark.sql.catalog.",
    "spark.sql.hive.",
    "spark.hive.",
    "spark.kryo.",
    "spark.ssl.",
    "spark.kerberos.",
)
#: Anywhere in a key: values that reach a JVM command line, a script, a pod spec or a mounted secret.
_FLOOR_PARTS = (
    "javaoptions",
    "classpath",
    "librarypath",
    "discoveryscript",
    "discoveryplugin",
    "podtemplate",
    "podfeaturesteps",
    "keytab",
    ".secrets.",
    "secretkeyref",
    ".volumes.",
    ".env.",
)
#: A key's part ending so names a class, a script or a command (`fs.s3a.impl`, `….credentials.provider`,
#: `net.topology.script.file.name`, `spark.ui.filters`): its value loads code or runs a program.
_CODE_WORDS = (
    "class",
    "classes",
    "impl",
    "plugin",
    "plugins",
    "extensions",
    "listener",
    "listeners",
    "registrator",
    "script",
    "command",
    "filters",
    "factory",
    "provider",
    "providers",
    "signers",
    "binding",
    "codecs",
    "mapping",
    "interceptors",
    "loader",
    "classname",  # fs.s3a.audit.service.classname
    "handlers",  # fs.s3a.audit.request.handlers
    "dir",  # a local directory a JVM writes to (fs.s3a.buffer.dir)
    "path",  # … or reads or writes (fs.s3a.committer.staging.tmp.path)
)


def forbidden_reason(key: str) -> str | None:
    """Why `key` is refused whatever the operator allows, or None."""
    lower = key.lower()
    if lower in _ENFORCED_LOWER:
        return "the runtime's own safety setting"
    if lower in _FLOOR_KEYS or lower.startswith(_FLOOR_PREFIXES):
        return "loads code or files, sets a process's environment, or changes how Spark is launched"
    if any(part in lower for part in _FLOOR_PARTS):
        return "its value reaches a JVM or shell command line, or mounts files or secrets"
    if any(part.endswith(_CODE_WORDS) for part in lower.split(".")[1:]):
        return "its value names a class, script, command or local path to load, run or write"
    return None


def _value_problem(value: str) -> str | None:
    if len(value) > MAX_VALUE_CHARS:
        return f"value longer than {MAX_VALUE_CHARS} characters"
    if any(ord(c) < 32 or ord(c) == 127 or c in "\u0085\u2028\u2029" for c in value):
        return "value holds a control character or line break"
    if "${" in value:
        # Spark and Hadoop fill `${env.X}`, `${sys:X}`, `${other.key}` into conf values: an allowed key
        # would carry the worker's environment to wherever another allowed key points
        return "value holds `${`, which Spark and Hadoop fill with variables (the worker's environment)"
    return None


def _shown(key: str) -> str:
    """A key for a message: hostile characters escaped, long keys cut."""
    text = "".join(c if c.isascii() and c.isprintable() else f"\\u{ord(c):04x}" for c in key[:100])
    return text + ("…" if len(key) > 100 else "")


@dataclass(frozen=True)
class SparkConfPolicy:
    """The keys a pool's conf may set: the built-in allow-list plus the operator's, minus the floor."""

    extra_keys: frozenset[str] = frozenset()
    extra_prefixes: tuple[str, ...] = ()

    @classmethod
    def parse(cls, allowed: str) -> SparkConfPolicy:
        """From `pool_conf_allowed_keys`: comma-separated exact keys or `prefix.*`."""
        entries = [e.strip() for e in allowed.split(",") if e.strip()]
        bad = [e for e in entries if not _ALLOWED_ENTRY.fullmatch(e)]
        if bad:
            raise ConfigError(
                f"`pool_conf_allowed_keys` (CONNECT_POOL_CONF_ALLOWED_KEYS): {[_shown(b) for b in bad]} are not "
                "Spark conf keys or `prefix.*` patterns"
            )
        keys = frozenset(e for e in entries if not e.endswith(".*"))
        prefixes = tuple(e[:-1] for e in entries if e.endswith(".*"))
        return cls(keys, prefixes)

    @classmethod
    def from_settings(cls, settings: Settings) -> SparkConfPolicy:
        return cls.parse(settings.pool_conf_allowed_keys)

    def allows(self, key: str) -> bool:
        return (
            key in ALLOWED_KEYS or key in self.extra_keys or key.startswith((*ALLOWED_PREFIXES, *self.extra_prefixes))
        )

    def refused(self, conf: Mapping[str, str]) -> dict[str, str]:
        """Each refused key of `conf` (as given) and why."""
        found: dict[str, str] = {}
        for key, value in conf.items():
            if not _KEY.fullmatch(key):
                found[key] = "not a Spark conf key (ASCII letters, digits, `.`, `_`, `-`)"
            elif why := forbidden_reason(key):
                found[key] = f"never allowed: {why}"
            elif not self.allows(key):
                found[key] = "not in the allowed keys"
            elif why := _value_problem(str(value)):
                found[key] = why
        return found

    def check(self, conf: Mapping[str, str], what: str) -> None:
        """A ConfigError listing every refused key of `conf` (`what`: "pool `east`")."""
        refused = self.refused(conf)
        if not refused:
            return
        listed = ", ".join(f"`{_shown(k)}` ({why})" for k, why in refused.items())
        raise ConfigError(
            f"{what}: Spark conf key(s) refused: {listed}. A pool may set sizing, parallelism, network and "
            "scheduling keys; the operator may allow more with `CONNECT_POOL_CONF_ALLOWED_KEYS` (comma-separated "
            "keys or `prefix.*`), except keys that load code or files, reach a command line or override the "
            "runtime's safety settings",
            {f"conf.{_shown(k)}": [why] for k, why in refused.items()},
        )

    def sanitized(self, conf: Mapping[str, str], what: str) -> dict[str, str]:
        """`conf` without its refused keys, each dropped with a warning naming the key, never its value
        (a conf stored before these rules: it must not reach the JVM, and the run goes on)."""
        refused = self.refused(conf)
        if refused:
            log.warning(
                "%s: Spark conf key(s) %s dropped: not allowed in a pool's or a connector's conf (a pool registered "
                "before the rule: register it again without them)",
                what,
                ", ".join(_shown(k) for k in refused),
            )
        return {str(k): str(v) for k, v in conf.items() if k not in refused}


# -- masters ------------------------------------------------------------------------------------
_LOCAL = re.compile(r"local(\[(\*|[1-9][0-9]{0,4})(,[0-9]{1,4})?\])?")
_SCHEMES = ("spark://", "k8s://", "sc://")
MAX_MASTER_CHARS = 2048


def check_master(master: str, what: str = "pool") -> None:
    """A ConfigError unless `master` is `local[…]`, `yarn`, `spark://…`, `k8s://…` or `sc://…` with no
    blank, control character or leading `-`: it becomes a spark-submit argument."""
    shown = mask_url_credentials(master[:200])
    if len(master) > MAX_MASTER_CHARS or any(c.isspace() or not c.isprintable() for c in master):
        raise ConfigError(f"{what}: master `{_shown(shown)}` holds a blank or control character, or is too long")
    if _LOCAL.fullmatch(master) or master == "yarn":
        return
    if master.lower().startswith(_SCHEMES) and len(master) > master.index("://") + 3:
        return
    raise ConfigError(
        f"{what}: master `{_shown(shown)}` is not one of local, local[n], local[*], spark://host:port, yarn, "
        "k8s://https://host:port or sc://host:port"
    )
