"""The Spark settings of a run, and how its secret ones travel.

`spark_conf` merges a run's settings in the order they win (every runner's, the pool's and its
connectors' as far as the conf policy allows, the driver's class-data archive, the enforced safety
settings). Secrets never travel as arguments: `ps` and `/proc/<pid>/cmdline` show every process's
arguments to every user of the machine, and spark-submit's command line ends up in logs. Settings
whose key looks secret (`spark.hadoop.fs.s3a.secret.key`) are split off (`split_secret_conf`) and go
in a properties file only the user can read, deleted as soon as spark-submit exits
(`secret_properties`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping

from connect_core.runtime.security import is_secret_key, masker
from connect_core.runtime.security.urls import mask_url_credentials
from connect_core.runtime.settings import Settings
from connect_core.runtime.spark.conf_policy import ENFORCED_CONF, SparkConfPolicy
from connect_core.runtime.spark.install import BASE_SPARK_CONF
from connect_core.runtime.spark.jvm_archive import driver_java_options
from connect_core.sdk.errors import ConfigError

__all__ = ["checked_jars", "merge_spark_conf", "secret_properties", "spark_conf", "split_secret_conf"]


def spark_conf(conf: Mapping[str, str] | None = None, settings: Settings | None = None) -> dict[str, str]:
    """The Spark settings of a run, in the order they win: every runner's (`BASE_SPARK_CONF`: no UI,
    UTC, a driver bound to loopback), then `conf` (a pool's and its connectors') as far as the pool
    conf policy allows (`conf_policy`, extended by `settings`; refused keys dropped, named in a
    warning), then with `settings` the driver's class-data archive (`jvm_archive`), and last the
    runtime's safety settings (`ENFORCED_CONF`), which nothing overrides.

    `spark.jars` is the one key beyond the policy: connectors name their JDBC drivers with it
    (`Connector.spark_conf`); only local `.jar` paths pass (`checked_jars`)."""
    policy = SparkConfPolicy.from_settings(settings) if settings is not None else SparkConfPolicy()
    archive = driver_java_options(settings) if settings is not None else None
    ours = {**BASE_SPARK_CONF, **({"spark.driver.extraJavaOptions": archive} if archive else {})}
    # what this function added before (a conf built once, then merged again): not the caller's
    given = {str(k): str(v) for k, v in (conf or {}).items() if ours.get(str(k)) != str(v)}
    jars = given.pop("spark.jars", "")
    merged = {**BASE_SPARK_CONF, **policy.sanitized(given, "the run's Spark conf")}
    if jars.strip():
        merged["spark.jars"] = checked_jars(jars)
    if archive:
        merged["spark.driver.extraJavaOptions"] = archive
    return {**merged, **ENFORCED_CONF}


def checked_jars(jars: str) -> str:
    """`spark.jars` of a connector: comma-separated absolute local paths of `.jar` files (no URL Spark
    would download, no blank or control character), else a ConfigError naming what is refused."""
    entries = [j.strip() for j in jars.split(",") if j.strip()]
    bad = [
        j
        for j in entries
        if not j.startswith(("/", "file:/", "local:/"))
        or not j.endswith(".jar")
        or any(c.isspace() or not c.isprintable() for c in j)
        or len(j) > 1024
    ]
    if bad:
        shown = ", ".join(f"`{mask_url_credentials(b[:200])}`" for b in bad)
        raise ConfigError(
            f"`spark.jars` may list only absolute local paths of .jar files, not {shown} "
            "(a connector's `connection.jar`: put the driver jar on the machine and name its path)"
        )
    return ",".join(entries)


def merge_spark_conf(*confs: Mapping[str, str]) -> dict[str, str]:
    """Later settings win, except `spark.jars`, whose comma-separated lists are joined."""
    merged: dict[str, str] = {}
    for conf in confs:
        for key, value in conf.items():
            if key == "spark.jars" and merged.get(key):
                jars = [*merged[key].split(","), *(j for j in value.split(",") if j not in merged[key].split(","))]
                merged[key] = ",".join(j for j in jars if j)
            else:
                merged[key] = value
    return merged


def split_secret_conf(conf: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(settings that may be arguments, settings whose key looks secret). The secret ones' values
    become known secrets of this process's masker, so no log line shows them either."""
    public: dict[str, str] = {}
    secret: dict[str, str] = {}
    for key, value in conf.items():
        (secret if is_secret_key(key) else public)[key] = str(value)
    for value in secret.values():
        masker.add(value)
    return public, secret


@contextlib.contextmanager
def secret_properties(entries: Mapping[str, str]) -> Iterator[list[str]]:
    """spark-submit arguments that load `entries` from a file only this user can read (a fresh 0700
    directory, a 0600 file), deleted when the block ends; no arguments when there is nothing secret.

    `--load-spark-defaults` keeps `spark-defaults.conf` in effect, which `--properties-file` alone
    would replace. spark-submit reads the file at start-up; it must exist until the process exits."""
    if not entries:
        yield []
        return
    folder = tempfile.mkdtemp(prefix="connect-submit-")  # mode 0700
    try:
        path = os.path.join(folder, "secret.properties")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(f"{_property(key)}={_property(value)}\n" for key, value in entries.items())
        yield ["--properties-file", path, "--load-spark-defaults"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _property(text: str) -> str:
    """`text` escaped for a Java properties file, which Spark reads as UTF-8."""
    return text.translate(_PROPERTY_ESCAPES)


_PROPERTY_ESCAPES = str.maketrans(
    {**{c: "\\" + c for c in "\\=:#! "}, "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}
)
