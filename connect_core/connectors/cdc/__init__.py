"""Change-data-capture connectors: log-based sources reading PostgreSQL's logical replication
(`pgoutput`) and MariaDB's row binlog as Debezium-style change events.

One subpackage per database (`postgres/`, `mariadb/`), each exporting its connector from its
`__init__`; what they share is here: Debezium's envelope (`envelope`), the configs (`config`), the
bounded server checks (`_deadline`) and the tasks' common part, their run's pre-check (`_source`).
"""
