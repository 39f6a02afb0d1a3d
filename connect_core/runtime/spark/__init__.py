"""Spark itself, at the bottom of the runtime: where Spark is (`install`), the settings of a run
and how its secret ones travel (`conf`, `conf_policy`), what a session is asked (`session`), Spark
Connect URLs and their probe (`connect`), and the driver JVM's class-data archive (`jvm_archive`).

Imports only the SDK, `settings` and `security` (import contracts in pyproject.toml)."""

__all__: list[str] = []
