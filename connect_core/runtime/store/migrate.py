"""Applying the Alembic migrations in `migrations/` to the metadata store.

They ship inside the package as `connect_core/_migrations` (a symlink to the top-level folder in
the checkout, a copy in a wheel), so an editable and a wheel install find them the same way.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

from connect_core.runtime.store.models import SCHEMA

__all__ = ["MIGRATIONS_DIR", "current", "downgrade", "head", "upgrade"]

MIGRATIONS_DIR = Path(str(files("connect_core") / "_migrations")).resolve()


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision`; a no-op when it is there already (safe to call at every start)."""
    cfg = _config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    cfg = _config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


@cache
def head() -> str:
    """The revision this code's migrations end at."""
    found = ScriptDirectory.from_config(_config()).get_current_head()
    assert found is not None, "the migrations have no head"
    return found


def current(conn: Connection) -> str | None:
    """The revision the metadata schema is at (None: never migrated)."""
    exists = conn.execute(text("SELECT to_regclass(:t)"), {"t": f"{SCHEMA}.alembic_version"}).scalar()
    if exists is None:
        return None
    return conn.execute(text(f'SELECT version_num FROM "{SCHEMA}".alembic_version')).scalar()
