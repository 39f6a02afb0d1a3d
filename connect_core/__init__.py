"""connect_core: a Connect runtime (Kafka Connect / RocketMQ Connect) on Spark and Postgres.

The package root re-exports the connector SDK; the runtime lives in
`connect_core.runtime` and is never imported from here, so a connector author's
code (and the Airflow scheduler) can import this without Spark or a database.
"""

from connect_core.sdk import *  # noqa: F403
from connect_core.sdk import __all__ as _sdk_all

__all__ = list(_sdk_all)
__version__ = "0.1.0"
