"""The metadata store: the schema (SQLAlchemy models), the engine, migrations, connector configs
and the change feed that lets readers cache."""
