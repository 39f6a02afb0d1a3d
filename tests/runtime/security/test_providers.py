"""Config providers are opt-in (Kafka's `config.providers`), confined (`allowed.paths`), resolved only where
the task runs, and a resolved value is never shown: not in a trace, a status, a log line or a response."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.security import ConfigProviders, SecretMasker
from connect_core.sdk.errors import ConfigError
from tests.conftest import make_runner


def test_env_and_file_placeholders(tmp_path: Path) -> None:
    secrets = tmp_path / "db.properties"
    secrets.write_text("# comment\nuser = app\npassword=pw-from-file\n")
    masker = SecretMasker()
    providers = ConfigProviders(
        {"env", "file"},
        file_allowed_paths=[tmp_path],
        secret_masker=masker,
        environ={"DB_PASSWORD": "pw-from-env"},
    )
    resolved = providers.resolve(
        {
            "a": "${env:DB_PASSWORD}",
            "b": f"${{file:{secrets}:password}}",
            "c": f"jdbc://${{file:{secrets}:user}}@h",
            "n": 3,
            "nested": {"x": "${env:DB_PASSWORD}"},
        }
    )
    assert resolved == {
        "a": "pw-from-env",
        "b": "pw-from-file",
        "c": "jdbc://app@h",
        "n": 3,
        "nested": {"x": "pw-from-env"},
    }
    # Every resolved value is a known secret from now on.
    assert "pw-from-env" not in masker.text("boom: pw-from-env and pw-from-file")
    assert "pw-from-file" not in masker.text("boom: pw-from-env and pw-from-file")
    with pytest.raises(ConfigError, match="NOPE"):
        providers.resolve({"a": "${env:NOPE}"})
    with pytest.raises(ConfigError, match="missing"):
        providers.resolve({"a": f"${{file:{secrets}:missing}}"})


def test_providers_are_opt_in_and_confined(tmp_path: Path) -> None:
    off = ConfigProviders()
    assert "not enabled" in off.problems({"p": "${env:HOME}"})["p"][0]
    with pytest.raises(ConfigError, match="CONNECT_CONFIG_PROVIDERS"):
        off.resolve({"p": "${env:HOME}"})
    on = ConfigProviders({"env", "file"}, file_allowed_paths=[tmp_path / "secrets"])
    assert "allowed paths" in on.problems({"p": "${file:/etc/shadow:root}"})["p"][0]
    # `..` and symlinks are resolved before the check.
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "link").symlink_to("/etc/passwd")
    assert on.problems({"p": f"${{file:{tmp_path}/secrets/../../etc/passwd}}"})
    assert on.problems({"p": f"${{file:{tmp_path}/secrets/link}}"})
    assert on.problems({"p": "${file:relative.properties:k}"})
    # The runtime's own settings are not readable through `env` by default.
    assert "ALLOWLIST" in on.problems({"p": "${env:CONNECT_DATABASE_URL}"})["p"][0]
    assert "unknown config provider" in on.problems({"p": "${vault:secret/x}"})["p"][0]


def test_create_rejects_disabled_provider(runtime: Runtime, tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("x\n")
    with pytest.raises(ConfigError) as caught:
        runtime.create_connector(
            "src", {"connector.class": "FileSourceConnector", "file": "${env:SOURCE_DIR}/in.txt", "topic": "t"}
        )
    assert "CONNECT_CONFIG_PROVIDERS" in str(caught.value)


def test_runner_resolves_store_does_not_and_failure_hides_value(
    runtime: Runtime, spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "in.txt").write_text("x\n")
    monkeypatch.setenv("SOURCE_DIR", str(tmp_path))
    monkeypatch.setenv("MISSING_DIR", str(tmp_path / "no-such-dir-s3cr3tvalue"))
    runtime.providers = ConfigProviders({"env"})
    runtime.create_connector(
        "src", {"connector.class": "FileSourceConnector", "file": "${env:SOURCE_DIR}/in.txt", "topic": "t"}
    )
    assert runtime.connectors.get("src").config["file"] == "${env:SOURCE_DIR}/in.txt"
    runner = make_runner(runtime, spark)
    assert runner.run("src", 0).rows == 1
    # A resolved value the connector puts in its error never shows in the trace or the log.
    runtime.create_connector(
        "bad", {"connector.class": "FileSourceConnector", "file": "${env:MISSING_DIR}/in.txt", "topic": "t"}
    )
    with caplog.at_level(logging.INFO):
        result = runner.run("bad", 0)
    assert result.state == "FAILED"
    trace = runtime.connectors.status("bad").tasks[0].trace or ""
    assert "s3cr3tvalue" not in trace and "s3cr3tvalue" not in result.message
    assert "does not exist" in trace


def test_airflow_connections_fill_a_jdbc_connector(
    runtime: Runtime, spark, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`${airflow:CONN_ID:FIELD}`: an Airflow connection (here from Airflow's AIRFLOW_CONN_* variable)
    gives a JDBC source its URL and user; the store keeps the placeholders."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    with runtime.engine.begin() as conn:  # the test's own database
        conn.execute(text("CREATE TABLE public.shop_items (id int PRIMARY KEY, label text)"))
        conn.execute(text("INSERT INTO public.shop_items VALUES (1, 'a'), (2, 'b')"))
    airflow_uri = f"postgres://{url.username}@{url.host}:{url.port or 5432}/{url.database}?sslmode=disable"
    monkeypatch.setenv("AIRFLOW_CONN_SHOP_DB", airflow_uri)
    runtime.providers = ConfigProviders({"airflow"})
    config = {
        "connector.class": "JdbcSourceConnector",
        "connection.url": "${airflow:shop_db:jdbc_url}",
        "connection.user": "${airflow:shop_db:login}",
        "table.whitelist": "shop_items",
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "topic.prefix": "shop-",
    }
    runtime.create_connector("shop", config)
    assert runtime.connectors.get("shop").config["connection.url"] == "${airflow:shop_db:jdbc_url}"
    jars = runtime.spark_conf_for("shop")["spark.jars"]  # before it is resolved: both drivers
    assert "postgresql" in jars and "mariadb" in jars
    result = make_runner(runtime, spark).run("shop", 0)
    assert result.state == "SUCCEEDED" and result.rows == 2, result.message

    resolved = ConfigProviders({"airflow"}, secret_masker=SecretMasker()).resolve(
        {"url": "${airflow:shop_db:jdbc_url}", "mode": "${airflow:shop_db:extra.sslmode}"}
    )
    assert resolved == {"url": f"jdbc:postgresql://{url.host}:{url.port or 5432}/{url.database}", "mode": "disable"}
    with pytest.raises(ConfigError, match="FIELD one of host, port"):
        runtime.create_connector("bad", {**config, "connection.user": "${airflow:shop_db:uri}"})
    with pytest.raises(ConfigError, match="connection `nope`, which cannot be read"):
        ConfigProviders({"airflow"}, secret_masker=SecretMasker()).resolve({"x": "${airflow:nope:host}"})


def test_no_placeholder_fills_what_a_transform_computes_over() -> None:
    """A SQL transform could turn a filled-in secret into data in a form no masking knows
    (`reverse('${env:X}')` raised as an error): transform and predicate keys take no placeholder."""
    on = ConfigProviders({"env"}, environ={"SECRET_X": "supersecretvalue123"})
    query = "SELECT *, raise_error(reverse('${env:SECRET_X}')) AS x FROM __THIS__"
    problems = on.problems(
        {
            "transforms.q.query": query,
            "predicates.p.pattern": "${env:SECRET_X}",
            "query": "SELECT CAST(reverse('${env:SECRET_X}') AS int) AS id",  # the JDBC source's SQL
        }
    )
    assert set(problems) == {"transforms.q.query", "predicates.p.pattern", "query"}
    assert "transform's or predicate's config" in problems["transforms.q.query"][0]
    with pytest.raises(ConfigError, match="transform's or predicate's config"):
        on.resolve({"transforms.q.query": query})
    assert on.resolve({"connection.password": "${env:SECRET_X}"}) == {"connection.password": "supersecretvalue123"}
