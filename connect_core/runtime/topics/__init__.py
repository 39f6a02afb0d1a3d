"""The topic store: topics, partitions and committed segments in Postgres (`store`), and reading
and writing the segment files themselves (`segments`)."""
