"""Export job: every message of a store to Parquet, partitioned by topic and store date.

    <out>/topic=Orders/date=2026-11-21/part-....snappy.parquet

The date is the UTC day of `store_timestamp`.  All columns of the data source are written
except `topic` (it is the partition directory); `spark.read.parquet(out)` gives it back.
"""

from __future__ import annotations

import dataclasses

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .source import FORMAT_NAME

EXPORT_MODES = ("errorifexists", "overwrite", "append")
MS_PER_DAY = 86_400_000


@dataclasses.dataclass(frozen=True)
class ExportResult:
    rows: int
    """Rows in the output directory after the export (all of them, in append mode)."""

    output: str


def store_frame(spark: SparkSession, directory: str, **options: str) -> DataFrame:
    reader = spark.read.format(FORMAT_NAME)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(directory)


def output_exists(spark: SparkSession, output: str) -> bool:
    """Whether `output` exists, asked of the file system Spark would write it with (any
    URL Spark writes), before the job reads a byte: Spark itself finds out only when the
    write starts, after planning and reading the store.  False when the session does not
    expose Hadoop's file systems (Spark Connect): Spark then refuses the write itself."""
    context = spark.sparkContext
    jvm, java_context = getattr(context, "_jvm", None), getattr(context, "_jsc", None)
    if jvm is None or java_context is None:
        return False
    path = jvm.org.apache.hadoop.fs.Path(output)
    return bool(path.getFileSystem(java_context.hadoopConfiguration()).exists(path))


def export(spark: SparkSession, directory: str, output: str, *, mode: str = "errorifexists",
           options: dict[str, str] | None = None) -> ExportResult:
    if mode not in EXPORT_MODES:
        raise ValueError(f"mode {mode!r}: expected one of {', '.join(EXPORT_MODES)}")
    if mode == "errorifexists" and output_exists(spark, output):
        raise FileExistsError(f"{output} exists: give --overwrite (mode 'overwrite') to "
                              f"replace it, or mode 'append' to add to it")
    frame = store_frame(spark, directory, **(options or {}))
    # Day arithmetic on the epoch milliseconds: the UTC date whatever the session time zone.
    days = F.floor(F.unix_millis("store_timestamp") / MS_PER_DAY).cast("int")
    dated = frame.withColumn("date", F.date_add(F.lit("1970-01-01").cast("date"), days))
    dated.write.mode(mode).partitionBy("topic", "date").parquet(output)
    # Parquet footers hold the row counts: counting what is there reads no data.
    return ExportResult(rows=spark.read.parquet(output).count(), output=output)
