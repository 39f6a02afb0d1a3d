"""The PostgreSQL source's stream: a run reads the slot from its committed position up to the WAL
end of when it began, whole transactions only, each captured table's row changes filed as they
came and decoded a column at a time while the stream waits for the server (`pgbatch`)."""

from __future__ import annotations

import select
import time
from typing import TYPE_CHECKING, Any

from connect_core.connectors.cdc.config import PostgresCdcConfig
from connect_core.connectors.cdc.envelope import topic_for
from connect_core.connectors.cdc.postgres import _server, pgbatch, pgoutput
from connect_core.sdk.errors import RetriableError

if TYPE_CHECKING:
    pass

__all__ = ["DECODE_CHUNK", "Stream"]


#: How long the stream must be quiet before the server's reported WAL end is taken as reached.
_QUIET_S = 0.5


#: Row changes decoded at a time while the stream waits for the server (`pgbatch`).
DECODE_CHUNK = 20_000


class Stream:
    """Reads the slot: whole transactions, each captured table's row changes filed as they came
    (`pgbatch.RowChanges`), decoded in bulk at the end (`tables`)."""

    def __init__(
        self,
        cfg: PostgresCdcConfig,
        names: _server.Names,
        by_name: dict[str, _server.Table],
        log: Any,
        partitions: dict[str, _server.Table] | None = None,
    ) -> None:
        self.cfg, self.names, self.by_name, self.log = cfg, names, by_name, log
        self.partitions = partitions or {}  # a partition's `schema.name` → its captured partitioned table
        self._pieces: dict[str, list[pgbatch.RowChanges | pgbatch.Truncated]] = {}  # by topic
        self._tables: dict[str, _server.Table] = {}  # by topic
        self._groups: dict[int, pgbatch.RowChanges | None] = {}  # by relation OID (None: not captured)
        self._skipped: list[bytes] = []  # changes to tables published but not captured
        self._truncates = 0
        self._decoder = pgoutput.Decoder()

    def read(self, start: int, target: int) -> int:
        """Stream from `start` to `target`; the position just past the last complete transaction read."""
        if target <= start:
            return start
        cfg = self.cfg
        timeout = cfg.poll_timeout_ms / 1000
        reached = start
        begin: pgoutput.Begin | None = None
        opened: dict[int, list[bytes]] = {}  # the open transaction's messages, by relation OID
        changes = polled = size = 0  # row changes streamed (captured or not) and their bytes; changes at the last poll
        with _server.replication(cfg) as replication:
            cur = replication.cursor()
            cur.start_replication(
                slot_name=self.names.slot,
                decode=False,
                start_lsn=start,
                options={"proto_version": "1", "publication_names": self.names.publication},
            )
            cur.send_feedback(flush_lsn=start, force=True)  # the last run's commit: confirmed only now
            heard = time.monotonic()  # the last data message (or the start)
            deadline = heard + timeout
            while True:
                message = cur.read_message()
                if message is None:
                    if changes != polled:  # row changes came since the last poll
                        polled, heard = changes, time.monotonic()
                        deadline = heard + timeout
                    # The server's reported WAL end can run ahead of what it has decoded and sent
                    # yet: trust it only once the stream has been quiet for a moment.
                    quiet = time.monotonic() - heard >= _QUIET_S
                    if begin is None and (reached >= target or (cur.wal_end >= target and quiet)):
                        break
                    if time.monotonic() > deadline:
                        if begin is None:
                            break
                        raise RetriableError(
                            f"the server streamed no more of slot `{self.names.slot}` within "
                            f"{cfg.poll_timeout_ms} ms while a transaction was open (poll.timeout.ms)"
                        )
                    if not self._decode_some():  # the server has sent nothing yet: decode what it sent
                        select.select([cur], [], [], 0.2)
                    continue
                payload = message.payload
                if payload and payload[0] in pgoutput.ROW_CHANGES:  # the hot path: filed as it came
                    oid = int.from_bytes(payload[1:5], "big")
                    into = opened.get(oid)
                    if into is None:
                        into = opened[oid] = self._enter(oid, begin)
                    into.append(payload)
                    changes += 1
                    size += len(payload)
                    continue
                heard = time.monotonic()
                deadline = heard + timeout
                event = self._decoder.decode(payload)
                if isinstance(event, pgoutput.Begin):
                    if begin is not None:
                        raise pgoutput.PgOutputError("a Begin inside an open transaction (no Commit before it)")
                    begin, opened = event, {}
                elif isinstance(event, pgoutput.Commit):
                    begin, opened = None, {}  # a change before the next Begin is outside any transaction
                    self._skipped.clear()
                    reached = event.end_lsn
                    if event.end_lsn >= target or changes >= cfg.max_batch_size or size >= cfg.max_batch_bytes:
                        break
                elif isinstance(event, pgoutput.Relation):  # a new description: its changes file apart
                    self._groups.pop(event.oid, None)
                    opened.pop(event.oid, None)
                elif isinstance(event, pgoutput.Truncate):
                    for oid in event.relation_oids:
                        self._truncate(oid, begin)
                        opened.pop(oid, None)  # the changes after it file after it
        return reached

    @property
    def count(self) -> int:
        """Row changes and truncates of captured tables streamed."""
        return self._truncates + sum(
            len(p.messages) for pieces in self._pieces.values() for p in pieces if isinstance(p, pgbatch.RowChanges)
        )

    def tables(self) -> dict[str, Any]:
        """Each captured table's events (an Arrow table), by topic."""
        return {
            topic: pgbatch.envelope_table(topic, self._tables[topic].key, pieces)
            for topic, pieces in self._pieces.items()
        }

    def _decode_some(self) -> bool:
        """Decode `DECODE_CHUNK` filed changes of a table that has that many pending, if one has:
        done while the stream waits for the server, the decoding costs the run (almost) nothing."""
        for group in self._groups.values():
            if group is not None and group.pending >= DECODE_CHUNK:
                group.decode_early(DECODE_CHUNK)
                return True
        return False

    def _group(self, oid: int) -> pgbatch.RowChanges | None:
        """The RowChanges a change to relation `oid` goes to now (None: a table not captured)."""
        if oid in self._groups:
            return self._groups[oid]
        relation = self._decoder.relation(oid)
        name = f"{relation.namespace}.{relation.name}"
        table = self.by_name.get(name) or self.partitions.get(name)  # published, maybe not captured
        group = None
        if table is not None:
            topic = topic_for(self.cfg.topic_prefix, table.schema, table.name)
            group = pgbatch.RowChanges(relation, topic, table.key)
            self._pieces.setdefault(topic, []).append(group)
            self._tables[topic] = table
        self._groups[oid] = group
        return group

    def _enter(self, oid: int, begin: pgoutput.Begin | None) -> list[bytes]:
        """The list the open transaction's changes to relation `oid` go to."""
        if begin is None:
            raise pgoutput.PgOutputError("a row change outside a transaction (no Begin before it)")
        group = self._group(oid)
        if group is None:
            return self._skipped
        return group.begin(self._source(group.relation, begin), int(time.time() * 1000))

    def _truncate(self, oid: int, begin: pgoutput.Begin | None) -> None:
        if begin is None:
            raise pgoutput.PgOutputError("a TRUNCATE outside a transaction (no Begin before it)")
        group = self._group(oid)
        if group is None:
            return
        relation = group.relation
        self._groups.pop(oid, None)  # the changes after it file after it
        topic = topic_for(self.cfg.topic_prefix, relation.namespace, relation.name)
        self._pieces[topic].append(pgbatch.Truncated(relation, self._source(relation, begin), int(time.time() * 1000)))
        self._truncates += 1

    def _source(self, relation: pgoutput.Relation, begin: pgoutput.Begin) -> dict[str, Any]:
        commit_ms = int(begin.commit_ts.timestamp() * 1000)
        return _server.source_info(
            self.cfg, relation.namespace, relation.name, commit_ms, "false", begin.xid, begin.final_lsn
        )
