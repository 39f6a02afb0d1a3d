"""Topics as an admin sees them (Kafka's admin client): describe, configure, clean, delete; their
schema history."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_core.runtime.management._room import Room
from connect_core.sdk.errors import ConfigError, ConflictError, NotFoundError

__all__ = ["Topics"]


class Topics(Room):
    def list_topics(self) -> list[dict[str, Any]]:
        """Every topic: partitions, segments and rows kept, end offsets, retention, its sinks' lag."""
        return self.rt.topics.describe(self.rt.settings.topic_retention_ms)

    def describe_topic(self, name: str) -> dict[str, Any]:
        found = self.rt.topics.describe(self.rt.settings.topic_retention_ms, only=name)
        if not found:
            raise NotFoundError(f"topic `{name}` not found")
        return found[0]

    def topic_schema(self, name: str, version: int | None = None) -> dict[str, Any]:
        """Version `version` of the topic's schema (None: the latest): `{"topic", "version", "id",
        "fingerprint", "run_id", "connector", "created_at", "schema"}`, `schema` the canonical
        document (`runtime.topics.schemas`). ConfigError for a name no topic can have (a NUL, a `/`),
        as over REST."""
        from connect_core.runtime.topics.store import check_topic_name

        found = self.rt.topics.schemas.version(check_topic_name(name), version)
        if found is None:
            versions = self.rt.topics.schemas.versions(name)
            if not versions:
                raise NotFoundError(
                    f"topic `{name}` has no schema history: no run has committed to it since it was "
                    "created (or since the metadata database was upgraded to record schemas)"
                )
            raise NotFoundError(f"topic `{name}` has no schema version {version}: its versions are 1 to {versions[-1]}")
        return found.to_dict()

    def schema_topics(self) -> list[str]:
        """The topics with a schema history, by name."""
        return self.rt.topics.schemas.topics()

    def schema_versions(self, name: str) -> list[int]:
        """The topic's schema versions, oldest first ([]: it has no history)."""
        return self.rt.topics.schemas.versions(name)

    def schema_by_id(self, schema_id: int) -> dict[str, Any] | None:
        """The schema version with id `schema_id` (unique over every topic), as `topic_schema` gives it."""
        found = self.rt.topics.schemas.by_id(schema_id)
        return found.to_dict() if found is not None else None

    def set_topic_config(self, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
        """Merge `config` (`runtime.topics.config`'s keys; null: back to the default) into the topic's."""
        from connect_core.runtime.topics.config import TopicConfigError

        try:
            self.rt.topics.set_config(name, dict(config))
        except KeyError:
            raise NotFoundError(f"topic `{name}` not found") from None
        except TopicConfigError as exc:
            raise ConfigError(str(exc), {key: [problem] for key, problem in exc.problems.items()}) from None
        return self.describe_topic(name)

    def apply_topic_retention(self, dry_run: bool = False) -> dict[str, Any]:
        """Clean the topics now (or with `dry_run` list what would happen): delete the segments past
        retention that every sink has committed, compact, merge small segments."""
        from connect_core.runtime.topics.cleaner import clean_topics

        return clean_topics(self.rt.engine, self.rt.settings.topic_retention_ms, dry_run=dry_run)

    def delete_topic(self, name: str, force: bool = False) -> dict[str, Any]:
        """Delete a topic (Kafka's admin delete): its rows, then its files. Refused (409) while a
        connector reads or writes it, unless `force`."""
        if not self.rt.topics.partitions(name):
            raise NotFoundError(f"topic `{name}` not found")
        users = self.rt.topics.users(name)
        writers = sorted({*users.writers, *self._sources_writing(name)})
        if (users.readers or writers) and not force:
            used = [f"read by {', '.join(f'`{c}`' for c in users.readers)}"] if users.readers else []
            used += [f"written by {', '.join(f'`{c}`' for c in writers)}"] if writers else []
            raise ConflictError(
                f"topic `{name}` is in use ({'; '.join(used)}): delete or reconfigure those connectors first, "
                "or delete it anyway with force (a source recreates it on its next run)"
            )
        try:
            deleted = self.rt.topics.delete_topic(name)
        except KeyError:
            raise NotFoundError(f"topic `{name}` not found") from None
        return {"topic": name, "segments": len(deleted), "rows": sum(s.row_count for s in deleted)}

    def _sources_writing(self, topic: str) -> list[str]:
        """The source connectors whose active topics (KIP-558) include `topic`."""
        found = []
        for info in self.rt.connectors.get_many(self.rt.connectors.names()).values():
            if info.type != "source":
                continue
            try:
                if topic in self.rt.connectors.active_topics(info.name):
                    found.append(info.name)
            except Exception:  # deleted meanwhile: the topic's own record of its writers still counts
                continue
        return found
