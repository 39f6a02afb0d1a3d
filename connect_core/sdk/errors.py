"""The error hierarchy shared by connectors and the runtime.

One root (`ConnectError`), split by what the caller can do about it:

* `ConfigError`: the configuration is wrong; fix it and resubmit.
* `RetriableError`: a transient failure; the same run may succeed later.
* `FatalError`: the task cannot continue; a human must look. `DataError`: a record's data is bad.
* `ConflictError`: a concurrent change won; re-read and retry (Kafka Connect's 409).
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ConflictError",
    "ConnectError",
    "DataError",
    "FatalError",
    "FencedError",
    "NotFoundError",
    "RetriableError",
]


class ConnectError(Exception):
    """Root of every error raised on purpose by connect_core and its connectors."""


class ConfigError(ConnectError):
    """A configuration is invalid.

    `errors` maps each offending config key to the list of its problems, so a
    caller can report every problem at once rather than one per attempt.
    """

    def __init__(self, message: str, errors: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.errors: dict[str, list[str]] = dict(errors or {})


class RetriableError(ConnectError):
    """A transient failure (a database that is down, a file still being written)."""


class FatalError(ConnectError):
    """A failure that rerunning will not fix."""


class DataError(FatalError):
    """A record's data cannot be converted, transformed or written (a string that is no number, a key
    that is not a struct, a value too long for its column): rerunning the same records cannot fix
    it; `errors.tolerance` decides whether the run fails or the record is set aside."""


class NotFoundError(ConnectError):
    """A named thing (connector, task, topic, plugin) does not exist."""


class FencedError(ConnectError):
    """A task run lost its lease: a newer generation owns the task, so this run may not commit."""


class ConflictError(ConnectError):
    """The request conflicts with the current state or with a concurrent change (a name taken, a
    task already running); Kafka Connect answers 409 the same way during a rebalance."""
