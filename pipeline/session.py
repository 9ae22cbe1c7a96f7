"""A Spark session with the `mqstore` format registered, on this machine or on a cluster.

Three things bite a PySpark data source that the defaults get wrong (see docs/spark.md):

* the JVM starts Python workers with `$PYSPARK_PYTHON`, `python3` on PATH by default, not the
  interpreter running the driver: without pyarrow and mqstore there, every read crashes;
* on a machine whose hostname resolves to a loopback address Spark binds to another
  interface and warns; a local master binds to 127.0.0.1 instead;
* a job started by `spark-submit` must take its master from spark-submit, not from a
  default of ours.

A job run from a terminal also wants to see it move and nothing else: with `log_level`, the
driver JVM this starts logs at that level from its first line (a log4j2 config of ours, via
`spark.driver.extraJavaOptions`; the JVM's own WARN lines about native libraries and host
names otherwise fill the screen for the 30-120 s of a job), and Spark's console progress
bar shows each stage when stderr is a terminal.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from .source import MqstoreDataSource

LOCAL_MASTER_DEFAULT = "local[*]"
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"

_LOG4J2_PROPERTIES = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = {level}
"""
"""The driver JVM's whole logging config: one level, to stderr.  Spark's default profile
logs WARN and above; and for a Python driver Spark sets the root level to that of the
gateway's logger (WARN unless configured, announced in two lines), hence that logger too.
Left on stderr: the JVM's own notice of Spark 4's vector module, printed before logging
starts."""


def launched_by_spark_submit() -> bool:
    """spark-submit starts the Python driver with the gateway already running."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def register(spark: SparkSession) -> SparkSession:
    """Register the `mqstore` format on `spark` (registration is per session)."""
    spark.dataSource.register(MqstoreDataSource)
    return spark


def build_session(*, app_name: str, master: str | None = None,
                  conf: Mapping[str, str] | None = None,
                  log_level: str | None = None) -> SparkSession:
    """getOrCreate a session: `master` if given, else spark-submit's, else `local[*]`.

    `log_level` ("ERROR", "WARN", ...): the JVM's level from its start when this starts it
    (not under spark-submit, nor with driver Java options in `conf`), else from the
    session's creation on."""
    if master is None and not launched_by_spark_submit():
        master = LOCAL_MASTER_DEFAULT
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
        if master.startswith("local"):
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = builder.config("spark.ui.showConsoleProgress",
                             "true" if sys.stderr.isatty() else "false")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    with tempfile.TemporaryDirectory(prefix="mqstore-spark-") as scratch:
        if log_level is not None and not launched_by_spark_submit() and \
                DRIVER_JAVA_OPTIONS not in (conf or {}):
            properties = Path(scratch) / "log4j2.properties"
            properties.write_text(_LOG4J2_PROPERTIES.format(level=log_level.lower()))
            builder = builder.config(DRIVER_JAVA_OPTIONS,
                                     f"-Dlog4j2.configurationFile=file:{properties}")
        spark = builder.getOrCreate()   # the JVM has read the file once it is up
    if log_level is not None:
        spark.sparkContext.setLogLevel(log_level)
    return register(spark)
