"""What the log-based sources' tasks share: where a task's position is kept, and the pre-check of a
run (`has_new_data`), which differs between databases only in the one question it asks the server."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, Generic, TypeVar, final

from connect_core.connectors.cdc.config import CdcConfig
from connect_core.sdk import Positions, SourceTask
from connect_core.sdk.errors import ConfigError, FatalError

__all__ = ["CdcSourceTask", "source_partition"]

ConfigT = TypeVar("ConfigT", bound=CdcConfig)


def source_partition(cfg: CdcConfig) -> dict[str, str]:
    """The source partition a task's position is committed under: one per `topic.prefix`."""
    return {"server": cfg.topic_prefix}


class CdcSourceTask(SourceTask, Generic[ConfigT]):
    """A task reading one server's log from the position committed under `source_partition`."""

    #: The connector's config model, which `cdc_config` validates the task's config with.
    config_model: type[ConfigT]
    #: The config `cdc_config` made last: the run's (its column masks know the tables it read).
    _config: ConfigT | None = None

    def cdc_config(self) -> ConfigT:
        self._config = self.config_model.model_validate(self.config)
        return self._config

    def close(self) -> None:
        """After the run: a warning for each column mask that named no column of the tables read
        (the run's reads took their masks from the config `cdc_config` made last)."""
        if self._config is not None:
            self._config.column_masks().warn_unmatched(self.log)

    @final
    def has_new_data(self, positions: Positions) -> bool | None:
        """A first run has work (its snapshot, or at least the position to start from); after an
        `initial_only` snapshot nothing streams; otherwise the server's log says (one query, no
        Spark), and a server that cannot tell lets the run go ahead and report it; one that refuses the
        login fails the task now."""
        cfg = self.cdc_config()
        committed = positions.offset(source_partition(cfg))
        if committed is None:
            return True
        if cfg.snapshot_mode == "initial_only":
            return False
        progress = committed.get("incremental")
        if self.context.signals or (progress and not progress.get("paused")):
            return True  # a signal to act on, or an incremental snapshot's next chunks to read
        try:
            return self.log_moved_past(cfg, committed)
        except (ConfigError, FatalError):
            raise  # a refused login: the run would fail the same way, after Spark
        except Exception as exc:  # the run reports it, with its context
            self.log.info("cannot tell whether there is anything new (%s); running", exc)
            return None

    @abstractmethod
    def log_moved_past(self, cfg: ConfigT, committed: Mapping[str, Any]) -> bool:
        """Whether the server's log holds anything written after `committed` (one query)."""
