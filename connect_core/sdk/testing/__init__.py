"""Testing support for connectors: the crash points the runtime's kill tests drive (`faults`)."""

from connect_core.sdk.testing import faults

__all__ = ["faults"]
