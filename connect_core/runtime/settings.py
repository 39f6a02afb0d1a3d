"""Runtime settings, read from `CONNECT_*` environment variables.

Everything has a working default: with nothing set, the metadata store is an
embedded Postgres under `CONNECT_HOME` and topics are Parquet under it too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CONNECT_", extra="ignore", frozen=True)

    home: Path = Field(
        default_factory=lambda: Path.cwd() / ".connect",
        description="Data directory of the runtime (embedded Postgres, topics, logs).",
        json_schema_extra={"shown_default": "`./.connect` (in the working directory)"},
    )
    database_url: SecretStr | None = Field(
        default=None,
        description="SQLAlchemy URL of the metadata Postgres; unset means the embedded server.",
    )
    topics_path: str | None = Field(
        default=None,
        description="Base path or Hadoop-compatible URI of topic segments; default `<home>/topics`.",
    )
    plugin_path: str = Field(
        default="",
        description="Directories (os.pathsep-separated) searched for connector modules, like `plugin.path`.",
    )
    db_pool_size: int = Field(default=10, ge=1, description="Connections each process keeps to the metadata store.")
    spark_submit: str | None = Field(
        default=None, description="Path of spark-submit; default: the one installed with pyspark."
    )
    jvm_archive_dir: Path = Field(
        default_factory=lambda: Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "connect-core",
        description="Where `connect spark-archive` keeps the Spark driver JVM's class-data archive.",
        json_schema_extra={"shown_default": "`$XDG_CACHE_HOME/connect-core` (unset: `~/.cache/connect-core`)"},
    )
    lease_seconds: float = Field(
        default=60.0, gt=0, description="A task run's lease; a run silent this long can be taken over."
    )
    heartbeat_timeout: float = Field(
        default=30.0, gt=0, description="Seconds without a heartbeat after which a Spark pool is dead."
    )
    rebalance_strategy: Literal["sticky", "default", "consistent-hash"] = Field(
        default="sticky", description="How the rebalance allocates connectors and tasks over live pools."
    )
    rebalance_max_delay: float = Field(
        default=60.0,
        ge=0,
        description="`scheduled.rebalance.max.delay` in seconds: how long `sticky` waits for a dead pool "
        "to come back before moving its work.",
    )
    probe_interval: float = Field(default=5.0, gt=0, description="Seconds between the rebalance sensor's probes.")
    history_retention_days: float = Field(
        default=7.0,
        ge=0,
        description="Days finished task runs (with their stats) and rebalance log rows are kept; each task's "
        "latest run and the latest rebalance are always kept. 0: keep everything.",
    )
    topic_retention_ms: int = Field(
        default=7 * 24 * 3600 * 1000,
        ge=-1,
        description="How long a topic's segments are kept once every sink reading it has committed them, "
        "unless the topic says otherwise (`retention.ms`; Kafka's default, 7 days); -1: for ever.",
    )
    airflow_dag_shards: int = Field(
        default=16,
        ge=1,
        le=32,
        description="How many DAG files share the connectors' DAGs (`dags/connect_dags.py`, then "
        "`dags/connect_dags_01.py` …; dags/ ships 32), each DAG in the file its id hashes to: a file parses "
        "in < 3 s up to 5,000 connectors of 4 tasks. Every Airflow process must see the same value; a change "
        "moves DAGs between files at their next parse.",
    )
    warm_pool: bool = Field(
        default=True,
        description="Whether `connect airflow up` starts a warm pool (a Spark Connect server and its worker) "
        "for the platform's tasks, the `local` pool standing by; false: every task is a spark-submit on `local`.",
    )
    airflow_url: str | None = Field(default=None, description="Airflow's base URL, to pause DAGs and trigger runs.")
    airflow_username: str = Field(default="admin", description="Airflow user for its REST API.")
    airflow_password: SecretStr | None = Field(default=None, description="Password of `airflow_username`.")
    rest_token: SecretStr | None = Field(
        default=None,
        description="Bearer token of the `operator` role, which may do everything; with no token set "
        "(this or the roles' below), `connect serve` serves loopback clients only, as an operator.",
    )
    rest_connector_token: SecretStr | None = Field(
        default=None,
        description="Bearer token of the `connector` role: manage and run connectors, read everything "
        "(CONNECT_REST_TOKEN is the `operator`'s: pools, topics, offsets resets, the rebalance too).",
    )
    rest_viewer_token: SecretStr | None = Field(
        default=None, description="Bearer token of the `viewer` role: read connectors, status, pools and topics."
    )
    rest_url: str | None = Field(default=None, description="A REST API for the CLI to use instead of the database.")
    # -- security (docs/security.md) --------------------------------------------------
    config_providers: str = Field(
        default="",
        description="Kafka's `config.providers`: comma-separated providers that may fill `${provider:…}` "
        "placeholders (`env`, `file`, `airflow`). Empty: none; a config with a placeholder is rejected.",
    )
    config_providers_file_allowed_paths: str = Field(
        default="",
        description="Kafka's `config.providers.file.param.allowed.paths` (KIP-993): comma-separated "
        "directories the `file` provider may read under. Empty: the data directory's `secrets/`.",
    )
    config_providers_env_allowlist_pattern: str = Field(
        default=r"^(?!CONNECT_).*",
        description="Kafka's `allowlist.pattern` of the `env` provider: variables it may read (never the "
        "runtime's own `CONNECT_*` by default).",
    )
    file_allowed_paths: str = Field(
        default="",
        description="`file.allowed.paths`: comma-separated directories file connectors may read and write "
        "under (symlinks and `..` resolved). Empty: the working directory of the process that starts.",
    )
    jdbc_driver_paths: str = Field(
        default="/usr/share/java",
        description="Comma-separated directories a JDBC connector's `connection.jar` may name a driver jar under "
        "(symlinks and `..` resolved; never inside `file.allowed.paths`, which connectors may write). "
        "Empty: only the built-in drivers.",
    )
    pool_conf_allowed_keys: str = Field(
        default="",
        description="Spark conf keys a pool may set beyond the built-in allow-list, comma-separated exact keys or "
        "`prefix.*`. Keys that load code or files, reach a command line or override the runtime's safety "
        "settings stay refused (connect_core/runtime/spark/conf_policy.py).",
    )
    rest_max_body_bytes: int = Field(default=1024 * 1024, ge=1024, description="Largest REST request body (413).")
    rest_max_value_bytes: int = Field(
        default=128 * 1024, ge=64, description="Largest single string value in a REST body (400)."
    )
    rest_max_depth: int = Field(default=32, ge=2, description="Deepest JSON nesting accepted in a REST body (400).")
    rest_allowed_hosts: str = Field(
        default="",
        description="Host header names the REST server answers to, comma-separated; empty: the bound "
        "address, `localhost`, loopback addresses (and this machine's name when bound to all addresses).",
    )
    rest_allowed_origins: str = Field(
        default="",
        description="Browser origins allowed to change state through the REST API (CORS-style), comma-separated.",
    )
    db_connect_timeout: float = Field(
        default=5.0,
        gt=0,
        le=600,
        allow_inf_nan=False,
        description="Seconds to wait for a metadata connection (libpq waits whole seconds, at least 2).",
    )
    db_statement_timeout: float = Field(
        default=30.0,
        gt=0,
        le=86400,
        allow_inf_nan=False,
        description="Longest a metadata statement may run, in seconds (every wait on the store is bounded).",
    )
    worker_id: str = Field(default_factory=lambda: f"{os.uname().nodename}:{os.getpid()}")

    @property
    def embedded(self) -> bool:
        return self.database_url is None

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"

    @property
    def topics_base(self) -> str:
        return self.topics_path or str(self.home / "topics")

    def runtime_data_dirs(self) -> list[Path]:
        """What the runtime keeps and trusts on this machine, which no connector may read or write, resolved:
        the embedded Postgres (`pgdata/`), local topics, the `file` provider's secrets, the pools' sockets,
        pid files and tokens (`pools/`), the local Airflow's home (`airflow/`, or `AIRFLOW_HOME`), the
        plugin path and the JVM archive: a connector writing there could read secrets or plant code. Any
        other file a user keeps under `CONNECT_HOME` (the quickstart's `quickstart/`) is theirs."""
        topics = str(self.topics_base).removeprefix("file://").removeprefix("file:")
        local_topics = [Path(topics)] if topics.startswith("/") else []  # not an hdfs:// or s3a:// store
        airflow_home = [Path(os.environ["AIRFLOW_HOME"])] if os.environ.get("AIRFLOW_HOME") else []
        dirs = [
            self.pgdata,
            self.home / "pools",
            self.home / "airflow",
            self.jvm_archive_dir,
            *airflow_home,
            *local_topics,
            *self.plugin_dirs(),
        ]
        return [Path(os.path.realpath(d.expanduser())) for d in dirs] + self.provider_file_dirs()

    def allowed_file_dirs(self) -> list[Path]:
        """Where file connectors may read and write, resolved (`file.allowed.paths`)."""
        return _dirs(self.file_allowed_paths) or [Path.cwd().resolve()]

    def provider_file_dirs(self) -> list[Path]:
        """Where the `file` config provider may read, resolved (`allowed.paths`)."""
        return _dirs(self.config_providers_file_allowed_paths) or [(self.home / "secrets").resolve()]

    def enabled_providers(self) -> frozenset[str]:
        return frozenset(p.strip() for p in self.config_providers.split(",") if p.strip())

    def plugin_dirs(self) -> list[Path]:
        return [Path(p) for p in self.plugin_path.split(os.pathsep) if p]


def _dirs(value: str) -> list[Path]:
    return [Path(p.strip()).expanduser().resolve() for p in value.split(",") if p.strip()]
