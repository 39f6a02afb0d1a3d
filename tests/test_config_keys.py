"""Every config key the code reads is declared on a config model, and the reference lists them all.

The scan parses every module of `connect_core` and finds each lookup of a dotted, key-shaped string
(`x.y`): `m.get("x.y")`, `m.pop(…)`, `m.setdefault(…)`, `m["x.y"]` (a read), `"x.y" in m`, the same
through a module-level constant (`_KEY = "x.y"; m.get(_KEY)`), and a call of a helper of the same
module that looks up its parameter (`def flag(key): return config.get(key)`; `flag("x.y")`).

Each key found must be declared where the code that reads it can rely on it (`_declared_for`): a
connector package's modules may read the keys of that package's plugins' models; the transforms
those of the transformations' and predicates' models; everything else (the runtime, REST, CLI, which
handle every connector) only keys every connector has: those of `ConnectorConfig`,
`SourceConnectorConfig` and `SinkConnectorConfig` (so a sink setting declared on one source plugin's
model, as `batch.max.rows` once was, does not count). What is not connector config is left out by
where it is read (`_NOT_CONFIG_RECEIVERS`, `_NOT_CONFIG_MODULES`), never by listing keys one by one.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import BaseModel

import connect_core
from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.reference import config_keys, config_reference, connector_base, field_keys
from connect_core.runtime.topics.config import TOPIC_KEYS
from connect_core.runtime.validation import connector_config_model
from connect_core.sdk.config import ConnectorConfig, SinkConnectorConfig, SourceConnectorConfig

PACKAGE = Path(connect_core.__file__).parent
#: Shaped like a Connect config key: dotted words (`topic.partitions`, `errors.log.enable`).
_KEY = re.compile(r"[a-z][a-zA-Z0-9_-]*(?:\.[a-zA-Z0-9_-]+)+")
_LOOKUPS = ("get", "pop", "setdefault")
#: Lookups that are not of a connector's config, left out by what they look in:
_NOT_CONFIG_RECEIVERS = (
    # a Spark session's conf (`spark.conf.get("spark.master")`): Spark's keys, not ours
    re.compile(r"(^|\.)conf$"),
    # an Arrow field's metadata (`field.metadata.get("connect.sql.type")`): column annotations
    re.compile(r"(^|\.)(metadata|meta)$"),
    # a Spark pool's labels (`SparkPoolRow.labels["file.allowed.paths"]`): what its workers recorded
    re.compile(r"(^|\.)labels$"),
)
#: ... and by the modules that handle only Spark conf (a pool's `spark.*` settings, merged and checked).
_NOT_CONFIG_MODULES = (
    "runtime/execution/submit.py",
    "runtime/spark/conf.py",
    "runtime/spark/session.py",
    "runtime/spark/conf_policy.py",
)


@dataclass(frozen=True)
class Read:
    where: str  # path:line
    key: str
    receiver: str


def _keys(models: list[type[BaseModel]]) -> set[str]:
    return {key for model in models for name, info in model.model_fields.items() for key in field_keys(name, info)}


def _common() -> set[str]:
    """Keys every connector has, and the per-topic keys a source sets as `topic.creation.default.<key>`
    (a topic's own config, read by the topic store: `retention.ms`)."""
    keys = _keys([ConnectorConfig, SourceConnectorConfig, SinkConnectorConfig])
    prefix = "topic.creation.default."
    return keys | {key[len(prefix) :] for key in keys if key.startswith(prefix)}


def _declared_for(module: str, registry: PluginRegistry | None = None) -> set[str]:
    """The keys code in `module` (`connect_core/connectors/jdbc/sink.py`) may read."""
    registry = registry or PluginRegistry()
    parts = module.split("/")
    if parts[1] == "connectors":
        package = ".".join(parts[:3]).removesuffix(".py")
        own = [
            connector_config_model(p.cls) for p in registry.plugins().values() if p.cls.__module__.startswith(package)
        ]
        return _common() | _keys(list(own))
    if parts[1] == "transforms":
        options = [*registry.transforms().values(), *registry.predicates().values()]
        return _common() | _keys([p.cls.config_model for p in options])
    return _common()


def scan(source: str, where: str) -> list[Read]:
    """The key-shaped lookups in one module's `source`."""
    tree = ast.parse(source)
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    helpers = _lookup_helpers(tree)

    def key_of(node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return constants.get(node.id)
        return None

    found: list[tuple[int, str | None, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _LOOKUPS:
                found.append((node.lineno, key_of(node.args[0]), ast.unparse(func.value)))
            elif isinstance(func, ast.Name) and func.id in helpers and len(node.args) > helpers[func.id]:
                found.append((node.lineno, key_of(node.args[helpers[func.id]]), f"{func.id}()"))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            found.append((node.lineno, key_of(node.slice), ast.unparse(node.value)))
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            found.append((node.lineno, key_of(node.left), ast.unparse(node.comparators[0])))
    return [
        Read(f"{where}:{line}", key, receiver)
        for line, key, receiver in found
        if key is not None
        and _KEY.fullmatch(key)
        and not any(pattern.search(receiver) for pattern in _NOT_CONFIG_RECEIVERS)
    ]


def _lookup_helpers(tree: ast.Module) -> dict[str, int]:
    """Functions of the module that look up one of their parameters (`def flag(key): … m.get(key)`),
    by the position of that parameter."""
    helpers: dict[str, int] = {}
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        params = [a.arg for a in function.args.args]
        for node in ast.walk(function):
            looked_up: ast.expr | None = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _LOOKUPS:
                looked_up = node.args[0] if node.args else None
            elif isinstance(node, ast.Subscript):
                looked_up = node.slice
            if isinstance(looked_up, ast.Name) and looked_up.id in params:
                helpers[function.name] = params.index(looked_up.id) - (1 if params[:1] in (["self"], ["cls"]) else 0)
    return helpers


def scan_package() -> list[Read]:
    reads: list[Read] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative not in _NOT_CONFIG_MODULES:
            reads += scan(path.read_text(encoding="utf-8"), f"connect_core/{relative}")
    return reads


def _undeclared(reads: list[Read], registry: PluginRegistry | None = None) -> list[str]:
    registry = registry or PluginRegistry()
    return [
        f"{r.where}: `{r.key}` (read from `{r.receiver}`)"
        for r in reads
        if r.key not in _declared_for(r.where.split(":")[0], registry)
    ]


def test_every_config_key_the_code_reads_is_declared_on_a_config_model() -> None:
    reads = scan_package()
    assert len(reads) > 10, "the scan finds the code's config lookups"
    assert _undeclared(reads) == [], "declare these keys on the config model they belong to"


def test_the_scan_catches_raw_reads_of_undeclared_keys() -> None:
    # How the runner and the dead-letter code read keys before they were declared: every form is found.
    before = """
_PARTITIONS = "topic.partitionz"

def stage(lease):
    partition_count = int(lease.connector_config.get(_PARTITIONS, 1))
    max_rows = lease.connector_config.get("batch.max.rowz")
    return lease.connector_config["errors.retry.timeoutz"], "topic.creation.default.partitionz" in lease.config

def settings(config):
    def flag(key):
        value = config.get(key, False)
        return value is True
    return flag("errors.log.enablez")
"""
    reads = scan(before, "connect_core/runtime/execution/example.py")
    assert {r.key for r in reads} == {
        "topic.partitionz",
        "batch.max.rowz",
        "errors.retry.timeoutz",
        "topic.creation.default.partitionz",
        "errors.log.enablez",
    }
    assert len(_undeclared(reads)) == 5
    # the two keys the runner read raw: now declared for every source / sink, so the runtime may read them
    assert {"topic.partitions", "batch.max.rows"} <= _declared_for("connect_core/runtime/execution/runner.py")
    # a key of one plugin's model is that plugin's: the runtime may not read it as if every connector had it
    jdbc_only = 'lease.connector_config.get("snapshot.partitions")'
    assert _undeclared(scan(jdbc_only, "connect_core/runtime/x.py")) != []
    assert _undeclared(scan(jdbc_only, "connect_core/connectors/jdbc/x.py")) == []
    # what is not connector config is left out by where it is read
    spark = 'spark.conf.get("spark.sql.runSQLOnFiles"); field.metadata.get("connect.sql.type")'
    assert scan(spark, "spark.py") == []


def _reference_sections(text: str) -> dict[str, str]:
    """The reference's `##`/`###` sections, by heading."""
    parts = re.split(r"^#{2,3} (.+)$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _table_keys(section: str) -> set[str]:
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE))


def test_the_reference_lists_every_declared_key_of_every_plugin() -> None:
    registry = PluginRegistry()
    text = config_reference(registry)
    sections = _reference_sections(text)
    common = _table_keys(sections["Every connector"])
    by_base = {
        SourceConnectorConfig: common | _table_keys(sections["Every source connector"]),
        SinkConnectorConfig: common | _table_keys(sections["Every sink connector"]),
        ConnectorConfig: common,
    }
    assert "topic.partitions" in by_base[SourceConnectorConfig]
    assert "batch.max.rows" in by_base[SinkConnectorConfig]
    for plugin in registry.plugins().values():
        model = connector_config_model(plugin.cls)
        listed = by_base[connector_base(model)] | _table_keys(sections[plugin.name])
        declared = {field_keys(name, info)[0] for name, info in model.model_fields.items()}
        assert declared - listed == set(), plugin.name
    for plugin in [*registry.transforms().values(), *registry.predicates().values()]:
        section = next(
            body for heading, body in sections.items() if f"`{plugin.name}`" in body or heading == plugin.name
        )
        declared = {k.key for k in config_keys(plugin.cls.config_model)}
        assert declared - _table_keys(section) == set(), plugin.name


def test_every_declared_key_has_a_description() -> None:
    registry = PluginRegistry()
    models: list[type[BaseModel]] = [connector_config_model(p.cls) for p in registry.plugins().values()]
    models += [p.cls.config_model for p in [*registry.transforms().values(), *registry.predicates().values()]]
    missing = [f"{m.__name__}.{k.key}" for m in models for k in config_keys(m) if not k.description]
    assert missing == []


def test_topic_keys_are_the_ones_a_source_sets_on_creation() -> None:
    """A topic's own keys are declared once, as the `topic.creation.default.*` keys of every connector."""
    prefix = "topic.creation.default."
    creation = {k.key[len(prefix) :] for k in config_keys(ConnectorConfig) if k.key.startswith(prefix)}
    assert creation == set(TOPIC_KEYS)


@pytest.mark.parametrize("secret", ["connection.password", "database.password"])
def test_the_reference_marks_secret_keys(secret: str) -> None:
    row = next(line for line in config_reference().splitlines() if line.startswith(f"| `{secret}` |"))
    assert "| yes |" in row
