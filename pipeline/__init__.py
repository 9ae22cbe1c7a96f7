"""mqstore's Spark pipeline: the `mqstore` data source (batch, streaming, write) and the jobs
(export, stats, verify, reindex).

    from mqstore.pipeline import build_session, register, MqstoreDataSource
    spark = build_session(app_name="mine")            # local[*], `mqstore` registered
    register(existing_spark)                          # or register on your own session
    spark.read.format("mqstore").load("/data")

The public names are loaded on first use, so that `mqstore.pipeline.cli` (which the
`mqstore` command line imports to build its parser) does not import pyspark.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "MqstoreDataSource": "source",
    "FORMAT_NAME": "source",
    "SPARK_SCHEMA": "schema",
    "ARROW_SCHEMA": "schema",
    "build_session": "session",
    "register": "session",
    "CorruptRecordError": "batches",
    "export": "job_export",
    "queue_stats": "job_stats",
    "verify": "job_verify",
    "reindex": "job_reindex",
    "ReindexSettings": "job_reindex",
}

__all__ = ["ARROW_SCHEMA", "FORMAT_NAME", "SPARK_SCHEMA", "CorruptRecordError", "MqstoreDataSource",
           "ReindexSettings", "build_session", "export", "queue_stats", "register",
           "reindex", "verify"]
assert sorted(__all__) == sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'mqstore.pipeline' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
