"""Files on object storage: Confluent's S3 sink (`io.confluent.connect.s3.S3SinkConnector`) for any
S3-compatible store (AWS, MinIO, …) or a local/NFS directory, writing Parquet or JSON lines.

Exactly once, without a commit of its own in the store: each file is named by its topic, Kafka
partition and first offset (`<topics.dir>/<topic>/<encoded partition>/<topic>+<p>+<offset:010d>.<ext>`),
and the cut into files depends only on the records from the committed offset on (`_chunks`). So:

* killed before writing anything, or part-way (`mid_sink`: some objects written, nothing
  committed): the next run reads the same records from the same committed offset, cuts the same
  files and writes them under the same names, overwriting each object whole (an S3 PUT replaces
  an object atomically; a local file is written under a hidden temporary name and renamed);
* killed after writing everything but before the runtime's commit: the same, every object
  rewritten with the same content (or, if records arrived meanwhile, the last file of each
  directory extended: the same name, now with more records);
* killed after the commit: the next run starts past those offsets, in new files.

Each record is therefore in exactly one object, provided the cut is a function of the records:
`timestamp.extractor` `Record` or `RecordField` for a time-based layout or `rotate.interval.ms`
(`Wallclock`, Confluent's default, reads the clock, so a rerun in another time bucket writes its
records to another directory), and the same config between the failed run and its rerun.
Objects of a run that failed are visible until the rerun rewrites them, as with Confluent's sink.
"""

from connect_core.connectors.objectstore.config import S3SinkConfig
from connect_core.connectors.objectstore.sink import S3SinkConnector, S3SinkTask

__all__ = ["S3SinkConfig", "S3SinkConnector", "S3SinkTask"]
