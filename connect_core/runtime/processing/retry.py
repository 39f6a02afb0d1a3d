"""Retrying a run's transient failures inside the run, as Kafka's `RetryWithToleranceOperator` does:
`errors.retry.timeout` (ms; 0 never, -1 forever) bounds the time spent retrying, each wait doubles
from 300 ms up to `errors.retry.delay.max.ms`.

What is transient: a connector's `RetriableError`, and the database failures a retry can outlive —
a lost or refused connection, a deadlock, a serialization failure, a lock or statement timeout —
recognised by their driver's class or SQLSTATE, also when they come back from a Spark worker as
the text of a `PythonException`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from connect_core.sdk.errors import ConfigError, DataError, FatalError, RetriableError

__all__ = ["RetryPolicy", "is_transient"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Kafka's first backoff (`RetryWithToleranceOperator.RETRIES_DELAY_MIN_MS`).
FIRST_DELAY_S = 0.3

# Driver exception classes and SQLSTATEs (PostgreSQL) / error numbers (MariaDB, MySQL) of failures a
# retry can outlive. Literal alternatives: linear to match, whatever the message holds.
_TRANSIENT = re.compile(
    r"psycopg2\.OperationalError|psycopg2\.errors\.(?:DeadlockDetected|SerializationFailure|LockNotAvailable"
    r"|QueryCanceled|AdminShutdown|CannotConnectNow|ConnectionFailure|ConnectionException)"
    r"|pymysql\.err\.OperationalError: \((?:1205|1213|2003|2006|2013)"
    r"|java\.sql\.SQLTransient|java\.sql\.SQLRecoverableException|org\.postgresql\.util\.PSQLException: "
    r"(?:Connection|An I/O error)|SQLSTATE\((?:08|40001|40P01|55P03|57014|57P0)"
)


def is_transient(exc: BaseException) -> bool:
    """Whether a retry of the same work may succeed."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, RetriableError):
            return True
        if isinstance(current, ConfigError | DataError | FatalError):
            return False
        code = getattr(current, "pgcode", None)
        if isinstance(code, str) and (code.startswith("08") or code in ("40001", "40P01", "55P03", "57014")):
            return True
        if _TRANSIENT.search(f"{type(current).__module__}.{type(current).__name__}: {current}"[:20_000]):
            return True
        current = current.__cause__ or current.__context__
    return False


@dataclass(frozen=True)
class RetryPolicy:
    timeout_ms: int = 0
    delay_max_ms: int = 60_000
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def run(self, what: str, work: Callable[[int], T], on_retry: Callable[[BaseException], None] | None = None) -> T:
        """`work(attempt)` until it succeeds, fails for good, or retrying has taken `timeout_ms`."""
        started = self.clock()
        delay = FIRST_DELAY_S
        attempt = 0
        while True:
            try:
                return work(attempt)
            except Exception as exc:
                if self.timeout_ms == 0 or not is_transient(exc):
                    raise
                waited_ms = (self.clock() - started) * 1000
                left_ms = float("inf") if self.timeout_ms < 0 else self.timeout_ms - waited_ms
                if left_ms <= 0:
                    raise
                pause = min(delay, self.delay_max_ms / 1000, left_ms / 1000)
                attempt += 1
                log.warning("%s failed (%s); retry %d in %.1f s", what, type(exc).__name__, attempt, pause)
                if on_retry is not None:
                    on_retry(exc)
                self.sleep(pause)
                delay *= 2
