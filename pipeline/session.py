"""A Spark session with the `mqstore` format registered, on this machine or on a cluster.

Three things bite a PySpark data source that the defaults get wrong (see docs/spark.md):

* the JVM starts Python workers with `$PYSPARK_PYTHON`, `python3` on PATH by default, not the
  interpreter running the driver: without pyarrow and mqstore there, every read crashes;
* on a machine whose hostname resolves to a loopback address Spark binds to another
  interface and warns; a local master binds to 127.0.0.1 instead;
* a job started by `spark-submit` must take its master from spark-submit, not from a
  default of ours.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from .source import MqstoreDataSource

LOCAL_MASTER_DEFAULT = "local[*]"


def launched_by_spark_submit() -> bool:
    """spark-submit starts the Python driver with the gateway already running."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def register(spark: SparkSession) -> SparkSession:
    """Register the `mqstore` format on `spark` (registration is per session)."""
    spark.dataSource.register(MqstoreDataSource)
    return spark


def build_session(*, app_name: str, master: str | None = None,
                  conf: Mapping[str, str] | None = None) -> SparkSession:
    """getOrCreate a session: `master` if given, else spark-submit's, else `local[*]`."""
    if master is None and not launched_by_spark_submit():
        master = LOCAL_MASTER_DEFAULT
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
        if master.startswith("local"):
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return register(builder.getOrCreate())
