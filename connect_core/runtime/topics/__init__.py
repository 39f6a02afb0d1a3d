"""The topic store: topics, partitions and committed segments in Postgres (`store`), and reading
and writing the segment files themselves (`segments`; without Spark: `files`).

A topic's lifecycle: its settings (`config`: Kafka's `retention.ms`, `retention.bytes`,
`cleanup.policy`, `delete.retention.ms`, `segment.bytes`), and one cleaning pass (`cleaner`) that
applies retention (`retention`), compacts by key (`compaction`) and merges small segments
(`merging`), rewriting segments crash-safely with their offsets kept (`rewrite`)."""
