"""A connector's offsets in Kafka Connect 3.6's shapes: read, alter, reset (to a time, for a sink).

A source's offsets are its positions (partition and offset objects of its own); a sink's are
`{"kafka_topic", "kafka_partition"}` → `{"kafka_offset"}`. Changes need a STOPPED connector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from connect_core.runtime.management._room import Room
from connect_core.runtime.store.connectors import ConnectorInfo
from connect_core.runtime.store.db import check_storable
from connect_core.runtime.store.states import TargetState
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.records import SourcePosition, TopicPartition

__all__ = ["NotStoppedError", "Offsets"]

#: Kafka's bounds of a topic partition (int32) and an offset (int64), which the store's columns share.
_MAX_PARTITION = 2**31 - 1
_MAX_OFFSET = 2**63 - 1


class NotStoppedError(ConfigError):
    """An operation that needs a STOPPED connector (as Kafka Connect's offset changes do)."""


class Offsets(Room):
    def offsets(self, name: str) -> dict[str, Any]:
        info = self.rt.connectors.get(name)
        if info.type == "source":
            entries = [
                {"partition": dict(p.partition), "offset": dict(p.offset)}
                for p in self.rt.connectors.positions(name).values()
            ]
        else:
            entries = [
                {
                    "partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
                    "offset": {"kafka_offset": c.offset},
                }
                for tp, c in sorted(self.rt.connectors.sink_offsets(name).items())
            ]
        return {"offsets": entries}

    def alter_offsets(self, name: str, offsets: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        """Set (or with a null offset, remove) the given partitions' offsets, in one transaction."""
        check_storable(list(offsets), "offsets")
        info = self._stopped(name)
        if info.type == "source":
            set_: list[SourcePosition] = []
            remove: list[Mapping[str, Any]] = []
            for entry in offsets:
                partition, offset = entry.get("partition"), entry.get("offset")
                if not isinstance(partition, Mapping) or not (offset is None or isinstance(offset, Mapping)):
                    raise ConfigError("each offset needs a `partition` object and an `offset` object or null")
                if offset is None:
                    remove.append(partition)
                else:
                    set_.append(SourcePosition(partition, offset))
            self.rt.connectors.alter_positions(name, set_=set_, remove=remove)
        else:
            self.rt.alter_sink_offsets(name, _sink_changes(offsets))
        return {"message": "The offsets for this connector have been altered successfully"}

    def reset_offsets(self, name: str, to_time: str | None = None) -> dict[str, str]:
        """Forget the offsets; with `to_time` (ISO 8601), move a sink's to the first records
        committed at or after it, to replay from there."""
        info = self._stopped(name)
        if to_time is None:
            self.rt.reset_offsets(name)
            return {"message": "The offsets for this connector have been reset successfully"}
        if info.type != "sink":
            raise ConfigError("only a sink's offsets can be reset to a time (a source's positions are its own)")
        try:
            when = datetime.fromisoformat(to_time.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(f"`{to_time}` is not an ISO 8601 time (2026-11-25T10:00:00Z)") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        config = self.rt.registry.resolve(info.connector_class).cls.config_model.model_validate(info.config)
        topics = list(getattr(config, "topics", []))
        offsets = self.rt.topics.offsets_at(topics, when)
        self.rt.alter_sink_offsets(name, dict(offsets))
        moved = ", ".join(f"{tp.topic}[{tp.partition}] → {o}" for tp, o in sorted(offsets.items())) or "no partitions"
        return {"message": f"The offsets for this connector have been reset to {when.isoformat()}: {moved}"}

    def _stopped(self, name: str) -> ConnectorInfo:
        info = self.rt.connectors.get(name)
        if info.target_state != TargetState.STOPPED:
            raise NotStoppedError(
                f"Connectors must be in the STOPPED state before their offsets can be modified; "
                f"`{name}` is {info.target_state}: stop it first (PUT /connectors/{name}/stop)"
            )
        return info


def _sink_changes(offsets: Sequence[Mapping[str, Any]]) -> dict[TopicPartition, int | None]:
    """Kafka's sink offsets as the store's changes (None: forget the partition's offset), checked."""
    changes: dict[TopicPartition, int | None] = {}
    for entry in offsets:
        partition, offset = entry.get("partition") or {}, entry.get("offset")
        try:
            tp = TopicPartition(str(partition["kafka_topic"]), int(partition["kafka_partition"]))
            value = None if offset is None else int(offset["kafka_offset"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                'sink offsets look like {"partition": {"kafka_topic": …, "kafka_partition": …}, '
                '"offset": {"kafka_offset": …}}'
            ) from exc
        if not 0 <= tp.partition <= _MAX_PARTITION:
            raise ConfigError(f"`kafka_partition` of `{tp.topic}` must be 0 to {_MAX_PARTITION}")
        if value is not None and not 0 <= value <= _MAX_OFFSET:
            raise ConfigError(f"offset of `{tp.topic}-{tp.partition}` must be 0 to {_MAX_OFFSET}")
        changes[tp] = value
    return changes
