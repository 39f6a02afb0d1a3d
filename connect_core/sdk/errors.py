"""The error hierarchy shared by connectors and the runtime.

One root (`ConnectError`), split by what the caller can do about it:

* `ConfigError`: the configuration is wrong; fix it and resubmit.
* `RetriableError`: a transient failure; the same run may succeed later.
* `FatalError`: the task cannot continue; a human must look.
* `ConflictError`: a concurrent change won; re-read and retry (Kafka Connect's 409).
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ConflictError",
    "ConnectError",
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


class NotFoundError(ConnectError):
    """A named thing (connector, task, topic, plugin) does not exist."""


class FencedError(ConnectError):
    """A task run lost its lease: a newer generation owns the task, so this run may not commit."""


class ConflictError(ConnectError):
    """The request conflicts with the current state or with a concurrent change (a name taken, a
    task already running); Kafka Connect answers 409 the same way during a rebalance."""
