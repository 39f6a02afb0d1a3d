"""The distributed deployment (docker-compose.yml, Dockerfile, .dockerignore), checked without a Docker engine.

The compose file is validated against the Compose Specification's JSON schema that
check-jsonschema vendors, then read as a user would read it: one image, loopback-only
ports, the Spark pool registration matching the Spark services, shared topic storage,
dependencies that can be met, and secrets that must come from the environment.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from sqlalchemy.engine import make_url

from connect_core.runtime.settings import Settings
from connect_core.runtime.store import migrate

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
DEPLOYMENT_DOC = REPO / "docs" / "deployment.md"
CONSTRAINTS = "requirements/constraints.txt"
IMAGE = "connect-core:local"

#: Variables the user must provide (environment or .env); Compose refuses to start without them.
REQUIRED_SECRETS = {
    "AIRFLOW_JWT_SECRET",
    "AIRFLOW_API_SECRET_KEY",
    "AIRFLOW_FERNET_KEY",
    "AIRFLOW_ADMIN_PASSWORD",
    "CONNECT_REST_TOKEN",
}
SECRET_NAME = re.compile(r"SECRET|PASSWORD|TOKEN|FERNET|JWT|_KEY$")
REQUIRED_INTERPOLATION = re.compile(r"^\$\{(?P<var>[A-Z][A-Z0-9_]*):\?[^}]+\}$")
#: `connect pools add` options (connect_core/cli): NAME --master --capacity --conf --label --probe-url.
POOLS_ADD_OPTIONS = {"--master", "--capacity", "--conf", "--label", "--probe-url"}


# --- reading the files ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    with COMPOSE.open() as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema with the Compose Specification schema it vendors (no network)."""
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def argv(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else list(command)


def script_lines(service: dict[str, Any]) -> list[list[str]]:
    """The commands of a `bash -ec SCRIPT` service, one argv per line."""
    args = argv(service)
    assert args[:2] == ["bash", "-ec"], f"expected `bash -ec SCRIPT`, got {args[:2]}"
    return [shlex.split(line) for line in args[2].splitlines() if line.strip()]


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def options(args: list[str], name: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == name]


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Named or bind volume source → container path, from the short or long syntax."""
    found = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        else:
            source, target = volume["source"], volume["target"]
        found[source] = target
    return found


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in deps.items()}


def spark_workers(services: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    return {name: argv(s) for name, s in services.items() if "org.apache.spark.deploy.worker.Worker" in argv(s)}


def spark_master(services: dict[str, dict[str, Any]]) -> tuple[str, list[str]]:
    (found,) = [(n, argv(s)) for n, s in services.items() if "org.apache.spark.deploy.master.Master" in argv(s)]
    return found


def pool_registration(services: dict[str, dict[str, Any]]) -> list[str]:
    lines = script_lines(services["airflow-init"])
    (add,) = [line for line in lines if line[:3] == ["connect", "pools", "add"]]
    return add


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    instructions, pending = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, rest = full.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


def dockerfile_copies() -> list[tuple[list[str], str]]:
    """(sources, destination) of every COPY, flags (--chown, --from …) dropped."""
    copies = []
    for keyword, rest in dockerfile_instructions():
        if keyword == "COPY":
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            copies.append((parts[:-1], parts[-1]))
    return copies


def dockerignore_excludes(path: str) -> bool:
    """Docker's rule for a top-level path: the last pattern that matches it (or a parent) decides."""
    excluded = False
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate, pattern = line.startswith("!"), line.lstrip("!").strip("/")
        parts = PurePosixPath(path.strip("/")).parts
        if any(fnmatch("/".join(parts[: i + 1]), pattern) for i in range(len(parts))):
            excluded = not negate
    return excluded


# --- the compose file ----------------------------------------------------------------------------


def test_compose_file_matches_the_compose_specification() -> None:
    result = validate(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok -- validation done" in result.stdout


def test_compose_file_has_no_obsolete_version_key(compose: dict[str, Any]) -> None:
    assert "version" not in compose


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        ("ports", "'abc' is not of type 'array'"),
        ("top-level", "'spark-cluster' does not match any of the regexes: '^x-'"),
        ("condition", "'service_finished'"),
    ],
)
def test_the_validator_rejects_a_broken_compose_file(tmp_path: Path, breakage: str, expected: str) -> None:
    """A deliberately broken copy fails the same check: the validator can say no."""
    text = COMPOSE.read_text()
    if breakage == "ports":  # a string where the schema wants a list
        broken = text.replace('ports:\n      - "127.0.0.1:8082:8082"', 'ports: "abc"')
    elif breakage == "top-level":  # an unknown top-level key (only x-… extensions are allowed)
        broken = text + "\nspark-cluster:\n  workers: 2\n"
    else:  # a depends_on condition Compose does not know
        broken = text.replace("condition: service_completed_successfully", "condition: service_finished")
    assert broken != text
    path = tmp_path / "docker-compose.yml"
    path.write_text(broken)
    result = validate(path)
    assert result.returncode != 0, result.stdout
    assert expected in result.stdout + result.stderr


def test_every_service_runs_the_one_image_built_here(services: dict[str, dict[str, Any]]) -> None:
    builders = {name: s["build"] for name, s in services.items() if "build" in s}
    assert builders == {"airflow-init": "."}, "exactly one service builds the image, from this directory"
    assert services["airflow-init"]["image"] == IMAGE
    for name, service in services.items():
        if name == "postgres":
            assert service["image"].startswith("postgres:16")
            continue
        assert service["image"] == IMAGE, name
        if "build" not in service:
            # never pulled: the image exists only once airflow-init's build made it
            assert service.get("pull_policy") == "never", name
    expected = {
        "postgres",
        "airflow-init",
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "connect-rest",
        "spark-master",
        "spark-worker-1",
        "spark-worker-2",
    }
    assert set(services) == expected


def test_published_ports_are_bound_to_loopback_only(services: dict[str, dict[str, Any]]) -> None:
    published = {}
    for name, service in services.items():
        for port in service.get("ports", []):
            if isinstance(port, dict):
                host_ip, target = port.get("host_ip"), port["target"]
            else:
                parts = str(port).split(":")
                assert len(parts) == 3, f"{name}: `{port}` must name the host address (127.0.0.1:HOST:CONTAINER)"
                host_ip, target = parts[0], parts[2]
            assert host_ip == "127.0.0.1", f"{name} publishes {port} beyond this machine"
            published[name] = int(target)
    assert published["airflow-apiserver"] == 8080
    assert published["connect-rest"] == 8082
    assert "postgres" not in published, "the metadata store stays on the project's network"


def test_the_airflow_init_service_migrates_then_registers_the_spark_pool(
    services: dict[str, dict[str, Any]],
) -> None:
    init = services["airflow-init"]
    lines = script_lines(init)
    assert [line[:3] for line in lines] == [
        ["airflow", "db", "migrate"],
        ["connect", "db", "upgrade"],
        ["connect", "pools", "add"],
        ["connect", "pools", "remove"],  # the built-in `local` pool: work runs on the cluster
    ]
    assert init["restart"] == "no", "a one-shot service: the others wait for it to complete"


def test_the_init_commands_run_as_written_against_a_real_postgres(
    services: dict[str, dict[str, Any]], empty_database_url: str, tmp_path: Path
) -> None:
    """airflow-init's `connect` lines, verbatim, through the installed CLI: the options exist and take effect."""
    connect = str(Path(sys.executable).with_name("connect"))
    env = {k: v for k, v in os.environ.items() if k not in ("CONNECT_REST_URL", "CONNECT_REST_TOKEN")}
    env |= {"CONNECT_DATABASE_URL": empty_database_url, "CONNECT_HOME": str(tmp_path / "home")}

    def run(args: list[str]) -> str:
        result = subprocess.run([connect, *args], env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"connect {shlex.join(args)}: {result.stdout}{result.stderr}"
        return result.stdout

    for line in script_lines(services["airflow-init"]):
        if line[0] == "connect":
            run(line[1:])
    pools = {p["name"]: p for p in json.loads(run(["pools", "list", "--output", "json"]))}
    assert "local" not in pools
    add = pool_registration(services)
    spark = pools[add[3]]
    assert spark["master"] == option(add, "--master")
    assert spark["capacity"] == int(option(add, "--capacity"))
    assert spark["probe_url"] == option(add, "--probe-url")
    assert spark["conf"] == dict(c.split("=", 1) for c in options(add, "--conf"))


def test_the_spark_pool_points_at_the_spark_master(services: dict[str, dict[str, Any]]) -> None:
    add = pool_registration(services)
    assert add[3] == "spark"
    assert {a for a in add if a.startswith("--")} <= POOLS_ADD_OPTIONS

    master_name, master = spark_master(services)
    url = urlsplit(option(add, "--master"))
    assert url.scheme == "spark"
    assert url.hostname == master_name == option(master, "--host")
    assert url.port == int(option(master, "--port"))

    probe = urlsplit(option(add, "--probe-url"))
    assert probe.hostname == master_name
    assert probe.port == int(option(master, "--webui-port"))
    assert probe.path == "/json", "the standalone master's JSON status"

    # The capacity is what the workers offer: one task per core.
    cores = [int(option(args, "--cores")) for args in spark_workers(services).values()]
    assert int(option(add, "--capacity")) == sum(cores)

    # Executors connect back to the driver, which runs inside the scheduler (LocalExecutor).
    conf = dict(c.split("=", 1) for c in options(add, "--conf"))
    assert conf["spark.driver.host"] == "airflow-scheduler"
    assert conf["spark.driver.host"] in services
    assert conf["spark.driver.bindAddress"] == "0.0.0.0"


def test_the_workers_register_with_the_master(services: dict[str, dict[str, Any]]) -> None:
    workers = spark_workers(services)
    assert sorted(workers) == ["spark-worker-1", "spark-worker-2"]
    pool_master = option(pool_registration(services), "--master")
    master_name, _ = spark_master(services)
    for name, args in workers.items():
        assert args[:2] == ["spark-class", "org.apache.spark.deploy.worker.Worker"]
        assert args[2] == pool_master, name
        assert option(args, "--memory") == "2g"
        assert depends_on(services[name]) == {master_name: "service_healthy"}


def test_the_topics_volume_is_shared_by_the_driver_and_the_executors(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    assert "topics" in compose["volumes"], "a named volume, declared at the top level"
    topics_path = environment(services["airflow-scheduler"])["CONNECT_TOPICS_PATH"]
    for name in ["airflow-scheduler", *spark_workers(services)]:
        assert mounts(services[name]).get("topics") == topics_path, name


def test_every_dependency_exists_and_can_be_met(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        for target, condition in depends_on(service).items():
            assert target in services, f"{name} depends on unknown service {target}"
            assert target != name
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits for {target}, which has no healthcheck"
            elif condition == "service_completed_successfully":
                assert services[target].get("restart") == "no", f"{name} waits for {target} to exit"
    for name in services:
        if name not in ("postgres", "airflow-init") and not name.startswith("spark-"):
            deps = depends_on(services[name])
            assert deps.get("postgres") == "service_healthy", name
            assert deps.get("airflow-init") == "service_completed_successfully", name
    assert depends_on(services["airflow-init"]) == {"postgres": "service_healthy"}


def test_secrets_come_from_required_interpolation(services: dict[str, dict[str, Any]]) -> None:
    required = set()
    for name, service in services.items():
        for key, value in environment(service).items():
            if not SECRET_NAME.search(key) or key.endswith("_FILE"):  # a path to a secret is no secret
                continue
            if key == "POSTGRES_PASSWORD":
                # The one literal: the database is reachable only from the project's network.
                assert "ports" not in service
                continue
            match = REQUIRED_INTERPOLATION.match(value)
            assert match, f"{name}: {key} must be `${{VAR:?message}}`, not a literal or a default"
            required.add(match["var"])
    assert required == REQUIRED_SECRETS
    text = COMPOSE.read_text()
    for var in REQUIRED_SECRETS:
        assert not re.search(rf"\$\{{{var}(:?-|-)", text), f"{var} must have no default"


def test_both_databases_live_on_the_postgres_service(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    pg = environment(services["postgres"])
    env = environment(services["airflow-scheduler"])
    connect_url = make_url(env["CONNECT_DATABASE_URL"])
    airflow_url = make_url(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    assert airflow_url.drivername == "postgresql+psycopg2"
    for url in (connect_url, airflow_url):
        assert (url.host, url.port, url.username, url.password) == (
            "postgres",
            5432,
            pg["POSTGRES_USER"],
            pg["POSTGRES_PASSWORD"],
        )
    assert connect_url.database == pg["POSTGRES_DB"]
    # The second database is created by the init script Postgres runs on its first start.
    (mount,) = services["postgres"]["configs"]
    assert mount["target"].startswith("/docker-entrypoint-initdb.d/")
    assert mount["target"].endswith(".sql")
    sql = compose["configs"][mount["source"]]["content"]
    assert re.search(rf"CREATE DATABASE {airflow_url.database}\b", sql)
    assert airflow_url.database != connect_url.database


def test_the_shared_environment_is_the_same_everywhere_and_points_at_services(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    shared = {k: str(v) for k, v in compose["x-connect-env"].items()}
    for name, service in services.items():
        if name == "postgres" or name.startswith("spark-"):
            assert not any(k.startswith(("CONNECT_", "AIRFLOW_")) for k in environment(service)), name
            continue
        env = environment(service)
        assert {k: env[k] for k in shared} == shared, f"{name} has the shared environment"
        assert "SPARK_LOCAL_IP" not in env, "containers have their own network and address"
    assert shared["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert shared["CONNECT_HEARTBEAT_TIMEOUT"] == "30"
    assert shared["CONNECT_REBALANCE_STRATEGY"] == "sticky"
    assert shared["AIRFLOW__CORE__AUTH_MANAGER"].endswith("SimpleAuthManager")
    assert shared["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin"
    for key in ("CONNECT_AIRFLOW_URL", "AIRFLOW__CORE__EXECUTION_API_SERVER_URL"):
        url = urlsplit(shared[key])
        assert url.hostname == "airflow-apiserver", key
        assert url.port == 8080, key
    # Airflow's folders are the ones the Dockerfile copies into the image.
    workdir = PurePosixPath([rest for kw, rest in dockerfile_instructions() if kw == "WORKDIR"][-1])
    destinations = {str(workdir / dest) for _, dest in dockerfile_copies()}
    for key in ("AIRFLOW__CORE__DAGS_FOLDER", "AIRFLOW__CORE__PLUGINS_FOLDER"):
        assert shared[key].rstrip("/") + "/" in {d.rstrip("/") + "/" for d in destinations}, key


def test_every_connect_variable_is_a_runtime_setting(
    compose: dict[str, Any], services: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A misspelt CONNECT_ variable would be ignored silently; these are all read, with valid values."""
    env = environment(services["connect-rest"])
    connect_vars = {k: v for k, v in env.items() if k.startswith("CONNECT_")}
    unknown = {k for k in connect_vars if k.removeprefix("CONNECT_").lower() not in Settings.model_fields}
    assert not unknown
    for key, value in connect_vars.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert settings.topics_base == env["CONNECT_TOPICS_PATH"]
    assert settings.airflow_url == env["CONNECT_AIRFLOW_URL"]


def test_the_api_server_writes_the_admin_password_the_cli_uses(services: dict[str, dict[str, Any]]) -> None:
    """SimpleAuthManager must be able to write its passwords file, so it is made at start, from the env."""
    (write, start) = script_lines(services["airflow-apiserver"])
    assert write[0] == "python"
    assert "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE" in write[2]
    assert "CONNECT_AIRFLOW_PASSWORD" in write[2]
    assert start == ["exec", "airflow", "api-server"]
    assert argv(services["connect-rest"]) == ["connect", "serve", "--host", "0.0.0.0", "--port", "8082"]


def test_named_volumes_are_created_writable_by_the_image_user(services: dict[str, dict[str, Any]]) -> None:
    """A new named volume copies ownership from the image's directory: each must exist there."""
    dockerfile = DOCKERFILE.read_text()
    for name, service in services.items():
        if service["image"] != IMAGE:
            continue
        for target in mounts(service).values():
            assert target in dockerfile, f"{name} mounts {target}, which the image does not create"


# --- the Dockerfile ------------------------------------------------------------------------------


def test_the_dockerfile_installs_with_the_constraints_file() -> None:
    instructions = dockerfile_instructions()
    assert instructions[0] == ("FROM", "python:3.11-slim-bookworm")
    runs = [rest for kw, rest in instructions if kw == "RUN"]
    installs = [cmd for run in runs for cmd in run.split("&&") if re.search(r"\bpip install\b", cmd)]
    assert installs, "the Dockerfile installs the project with pip"
    for cmd in installs:
        assert f"-c {CONSTRAINTS}" in cmd, cmd
        assert '".[airflow]"' in cmd, cmd
    assert (REPO / CONSTRAINTS).is_file()
    # The constraints are in the image before the first install.
    first_install = next(i for i, (kw, rest) in enumerate(instructions) if kw == "RUN" and "pip install" in rest)
    copied_before = [rest for kw, rest in instructions[:first_install] if kw == "COPY"]
    assert any("requirements/" in rest for rest in copied_before)
    apt = next(rest for kw, rest in instructions if kw == "RUN" and "apt-get install" in rest)
    for package in ("openjdk-17-jre-headless", "procps", "libpostgresql-jdbc-java", "libmariadb-java"):
        assert package in apt.split(), package


def test_every_path_the_dockerfile_copies_exists_and_reaches_the_build() -> None:
    copies = dockerfile_copies()
    sources = [src for srcs, _ in copies for src in srcs]
    assert set(sources) >= {
        "pyproject.toml",
        "requirements/",
        "connect_core/",
        "dags/",
        "plugins/",
        "migrations/",
        "README.md",
    }
    for src in sources:
        assert (REPO / src).exists(), f"COPY {src}: no such path in the repository"
        assert not dockerignore_excludes(src), f"COPY {src}: excluded from the build context by .dockerignore"
    for secret in (".env", ".venv", ".git", ".connect"):
        assert dockerignore_excludes(secret), f"{secret} must stay out of the build context"


def test_dependencies_are_installed_before_the_source_is_copied() -> None:
    """Cache-friendly layers: editing connect_core does not reinstall Airflow and Spark."""
    instructions = dockerfile_instructions()
    first_install = next(i for i, (kw, rest) in enumerate(instructions) if kw == "RUN" and "pip install" in rest)
    source_copy = next(i for i, (kw, rest) in enumerate(instructions) if kw == "COPY" and "connect_core/" in rest)
    assert first_install < source_copy
    assert "README.md" not in " ".join(rest for kw, rest in instructions[:first_install] if kw == "COPY")


def test_the_image_runs_the_source_tree_where_the_runtime_expects_it() -> None:
    """migrate.py finds migrations/ beside the package, so the image installs the copied tree editable."""
    assert migrate.MIGRATIONS_DIR == REPO / "migrations"
    instructions = dockerfile_instructions()
    workdir = PurePosixPath([rest for kw, rest in instructions if kw == "WORKDIR"][-1])
    destinations = {src.rstrip("/"): str(workdir / dest) for srcs, dest in dockerfile_copies() for src in srcs}
    assert destinations["migrations"] == str(workdir / "migrations")
    assert destinations["connect_core"] == str(workdir / "connect_core")
    assert any("pip install" in rest and " -e " in rest for kw, rest in instructions if kw == "RUN")


def test_the_image_runs_as_a_non_root_user() -> None:
    users = [rest for kw, rest in dockerfile_instructions() if kw == "USER"]
    assert users, "the image sets a USER"
    assert users[-1].partition(":")[0] not in ("root", "0")


def test_pip_puts_the_spark_launchers_on_the_interpreters_path() -> None:
    """The image relies on pip installing pyspark's launchers next to python (/usr/local/bin there)."""
    scripts = Path(sys.executable).parent
    for launcher in ("spark-class", "spark-submit", "find-spark-home", "find_spark_home.py"):
        assert (scripts / launcher).is_file(), launcher


# --- the guide -----------------------------------------------------------------------------------


def test_the_deployment_guide_names_every_service_and_secret(services: dict[str, dict[str, Any]]) -> None:
    guide = DEPLOYMENT_DOC.read_text()
    for name in services:
        assert f"`{name}`" in guide, name
    for var in REQUIRED_SECRETS:
        assert var in guide, var
    assert "docker compose up -d --build" in guide
