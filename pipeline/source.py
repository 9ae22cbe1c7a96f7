"""`MqstoreDataSource`: the `mqstore` format, registered per Spark session.

    spark.dataSource.register(MqstoreDataSource)        # or mqstore.pipeline.register(spark)
    spark.read.format("mqstore").load("/data")          # batch (reader.py)
    spark.readStream.format("mqstore").load("/data")    # streaming (stream_reader.py)
    df.write.format("mqstore").mode("append").save("/data")   # append (writer.py)

Options are listed in options.py (reads), stream_reader.py (streaming) and writer.py.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .options import parse_read_options
from .reader import MqstoreReader, check_schema
from .schema import SPARK_SCHEMA

FORMAT_NAME = "mqstore"


class MqstoreDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        check_schema(schema)
        return MqstoreReader(parse_read_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .stream_reader import MqstoreStreamReader  # noqa: PLC0415

        check_schema(schema)
        return MqstoreStreamReader(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .writer import MqstoreWriter  # noqa: PLC0415

        return MqstoreWriter(self.options, schema, overwrite=overwrite)
