"""A pool's Spark conf and master over real HTTP: refused keys, the operator's allow-list, masking."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
from fastapi.testclient import TestClient

from connect_core.rest.app import create_app
from connect_core.runtime.context import Runtime
from connect_core.runtime.settings import Settings
from connect_core.web.view import create_view_app
from tests.rest.conftest import Served, serve

OOM_COMMAND = "-XX:OnOutOfMemoryError=touch /tmp/pwned"


def _refused(api: Served, pool: str, spec: dict[str, object]) -> str:
    resp = httpx.put(f"{api.url}/pools/{pool}", json=spec)
    assert resp.status_code == 400, resp.text
    assert httpx.get(f"{api.url}/pools/{pool}").status_code == 404  # nothing stored
    return resp.text


def test_a_pool_conf_that_runs_a_command_is_refused(api: Served) -> None:
    text = _refused(api, "x", {"master": "local[*]", "conf": {"spark.driver.extraJavaOptions": OOM_COMMAND}})
    assert "spark.driver.extraJavaOptions" in text and "CONNECT_POOL_CONF_ALLOWED_KEYS" in text
    assert "pwned" not in text  # the value is not echoed


def test_every_refused_key_is_listed_at_once(api: Served) -> None:
    bad = {
        "spark.driver.extraJavaOptions": OOM_COMMAND,
        "Spark.Driver.ExtraJavaOptions": OOM_COMMAND,  # case variant
        " spark.executor.memory": "1g",  # blank around a key
        "spark.driver.extraJavaOpt\u0456ons": OOM_COMMAND,  # a Cyrillic look-alike of `i`
        "spark.sql.runSQLOnFiles": "true",
        "spark.jars": "http://evil.example/x.jar",
        "spark.executorEnv.LD_PRELOAD": "/tmp/evil.so",
        "spark.yarn.appMasterEnv.LD_PRELOAD": "/tmp/evil.so",
        "spark.hadoop.fs.s3a.impl": "com.evil.FileSystem",
        "spark.hadoop.fs.s3a.aws.credentials.provider": "com.evil.Provider",
        "spark.pyspark.python": "/tmp/evil",
        "spark.kubernetes.driver.podTemplateFile": "/etc/shadow",
        "spark.driver.resource.gpu.discoveryScript": "/tmp/evil.sh",
        "spark.redaction.regex": "nothing",
        "spark.something.unknown": "1",
    }
    text = _refused(api, "x", {"master": "local[*]", "conf": {"spark.executor.memory": "1g", **bad}})
    message = json.loads(text)["message"]
    for key in bad:  # each named, a non-ASCII character escaped
        assert f"`{key.encode('ascii', 'backslashreplace').decode()}`" in message, key
    assert "`spark.executor.memory`" not in message  # an allowed key is not
    assert "evil" not in text and "pwned" not in text


@pytest.mark.parametrize(
    "value", ["1g\n-XX:OnOutOfMemoryError=x", "1g\r\nspark.jars=/x.jar", "x" * 100_000, "1g\u2028x"]
)
def test_a_value_with_a_line_break_or_too_long_is_refused(api: Served, value: str) -> None:
    assert "spark.executor.memory" in _refused(
        api, "x", {"master": "local[*]", "conf": {"spark.executor.memory": value}}
    )


def test_the_operator_extends_the_allow_list_but_never_past_the_floor(settings: Settings) -> None:
    allowed = "spark.sql.broadcastTimeout, spark.driver.extraJavaOptions,spark.*"
    runtime = Runtime.open(settings.model_copy(update={"pool_conf_allowed_keys": allowed}))
    for api in serve(create_app(lambda: runtime)):
        _extend_but_not_past_the_floor(api)
    runtime.close()


def _extend_but_not_past_the_floor(api: Served) -> None:
    spec = {"master": "local[*]", "conf": {"spark.sql.broadcastTimeout": "600", "spark.speculation": "true"}}
    assert httpx.put(f"{api.url}/pools/x", json=spec).status_code == 201
    for key in ("spark.driver.extraJavaOptions", "spark.executorEnv.LD_PRELOAD", "spark.sql.runSQLOnFiles"):
        assert key in _refused(api, "y", {"master": "local[*]", "conf": {key: "x"}})


@pytest.mark.parametrize(
    "master",
    ["local[*] --conf x=y", "-v", "--conf=spark.jars=/x.jar", "local[*]\n", "spark://h:7077\n--jars", "file:///etc"],
)
def test_a_master_that_could_be_another_argument_is_refused(api: Served, master: str) -> None:
    assert "master" in _refused(api, "x", {"master": master})


def test_a_master_password_is_masked_wherever_the_pool_is_shown(api: Served, runtime: Runtime) -> None:
    masters = {"s": "spark://u:hunter2@127.0.0.1:7077", "k": "k8s://https://u:hunter2@127.0.0.1:6443"}
    for name, master in masters.items():
        assert httpx.put(f"{api.url}/pools/{name}", json={"master": master}).status_code == 201
    listed = httpx.get(f"{api.url}/pools")
    assert "hunter2" not in listed.text
    shown = {p["name"]: p["master"] for p in listed.json()}
    assert shown["s"] == "spark://u:***@127.0.0.1:7077" and shown["k"] == "k8s://https://u:***@127.0.0.1:6443"
    assert httpx.get(f"{api.url}/pools/s").json()["master"] == "spark://u:***@127.0.0.1:7077"
    assert {p.name: p.master for p in runtime.pools.list(30)}["s"] == masters["s"]  # stored as given

    view = TestClient(create_view_app(lambda: runtime))
    for page in ("/pools.json", "/data.json"):
        resp = view.get(page)
        assert resp.status_code == 200 and "hunter2" not in resp.text
    assert "u:***@" in view.get("/pools.json").text

    env = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_")}
    env["CONNECT_REST_URL"] = api.url
    for output in ("table", "json"):
        proc = subprocess.run(
            [sys.executable, "-m", "connect_core.cli", "pools", "list", "-o", output],
            env={**env, "COLUMNS": "250"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert "hunter2" not in proc.stdout + proc.stderr and "u:***@" in proc.stdout
