"""The rows of the `mqstore` data source: one per message, every field of the record.

| column             | Spark type               | from the record (storage/format/record.py)    |
|--------------------|--------------------------|----------------------------------------------|
| topic              | string                   | TOPIC                                        |
| queue_id           | int                      | QUEUEID                                      |
| queue_offset       | long                     | QUEUEOFFSET (logical: the consume queue slot)|
| physical_offset    | long                     | PHYSICALOFFSET (the record's log position)   |
| record_size_bytes  | int                      | TOTALSIZE                                    |
| body               | binary                   | BODY                                         |
| tags               | string, null if none     | property TAGS                                |
| keys               | array<string>            | property KEYS split on spaces, empties dropped|
| properties         | map<string, string>      | PROPERTIES, decoded as RocketMQ does         |
| born_timestamp     | timestamp                | BORNTIMESTAMP (ms since the epoch)           |
| store_timestamp    | timestamp                | STORETIMESTAMP (ms since the epoch)          |
| born_host          | string "ip:port"         | BORNHOST                                     |
| store_host         | string "ip:port"         | STOREHOST                                    |
| msg_id             | string                   | RocketMQ's offset msg id (store host + offset)|
| sysflag            | int                      | SYSFLAG                                      |
| flag               | int                      | FLAG (the producer's user flag)              |

Timestamps are Spark timestamps (microseconds, UTC); `unix_millis(store_timestamp)` gives the
stored milliseconds back exactly.  The data source yields Arrow record batches, and PySpark
accepts a batch only if its Arrow schema equals `to_arrow_schema(SPARK_SCHEMA)` exactly
(names, types and nullability), so `ARROW_SCHEMA` is derived from the Spark schema here, once.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

SPARK_SCHEMA = StructType([
    StructField("topic", StringType(), nullable=False),
    StructField("queue_id", IntegerType(), nullable=False),
    StructField("queue_offset", LongType(), nullable=False),
    StructField("physical_offset", LongType(), nullable=False),
    StructField("record_size_bytes", IntegerType(), nullable=False),
    StructField("body", BinaryType(), nullable=False),
    StructField("tags", StringType(), nullable=True),
    StructField("keys", ArrayType(StringType(), containsNull=False), nullable=False),
    StructField("properties", MapType(StringType(), StringType(), valueContainsNull=False),
                nullable=False),
    StructField("born_timestamp", TimestampType(), nullable=False),
    StructField("store_timestamp", TimestampType(), nullable=False),
    StructField("born_host", StringType(), nullable=False),
    StructField("store_host", StringType(), nullable=False),
    StructField("msg_id", StringType(), nullable=False),
    StructField("sysflag", IntegerType(), nullable=False),
    StructField("flag", IntegerType(), nullable=False),
])

ARROW_SCHEMA: pa.Schema = to_arrow_schema(SPARK_SCHEMA, timezone="UTC")
COLUMNS: tuple[str, ...] = tuple(SPARK_SCHEMA.fieldNames())
assert ARROW_SCHEMA.names == list(COLUMNS)

KEYS_TYPE: pa.DataType = ARROW_SCHEMA.field("keys").type
PROPERTIES_TYPE: pa.DataType = ARROW_SCHEMA.field("properties").type
TIMESTAMP_TYPE: pa.DataType = ARROW_SCHEMA.field("store_timestamp").type
assert pa.timestamp("us", tz="UTC") == TIMESTAMP_TYPE

# What `df.write.format("mqstore")` accepts: the columns a producer sets.
WRITE_COLUMNS_REQUIRED: dict[str, tuple[type, ...]] = {
    "topic": (StringType,),
    "queue_id": (IntegerType, LongType),
    "body": (BinaryType, StringType),
}
WRITE_COLUMNS_OPTIONAL: dict[str, tuple[type, ...]] = {
    "tags": (StringType,),
    "keys": (ArrayType,),
    "properties": (MapType,),
}


def check_write_schema(schema: StructType) -> None:
    """Raise `ValueError` naming every problem with the columns of a DataFrame to append."""
    problems = []
    fields = {field.name: field for field in schema.fields}
    for name, types in WRITE_COLUMNS_REQUIRED.items():
        if name not in fields:
            problems.append(f"missing column {name!r}")
        elif not isinstance(fields[name].dataType, types):
            problems.append(f"column {name!r} is {fields[name].dataType.simpleString()}, "
                            f"expected {' or '.join(t.__name__ for t in types)}")
    for name, types in WRITE_COLUMNS_OPTIONAL.items():
        if name in fields and not isinstance(fields[name].dataType, types):
            problems.append(f"column {name!r} is {fields[name].dataType.simpleString()}, "
                            f"expected {' or '.join(t.__name__ for t in types)}")
    accepted = set(WRITE_COLUMNS_REQUIRED) | set(WRITE_COLUMNS_OPTIONAL)
    unknown = sorted(set(fields) - accepted)
    if unknown:
        problems.append(f"unknown column(s) {unknown}: select only {sorted(accepted)} "
                        f"(the store assigns offsets, times and hosts itself)")
    if problems:
        raise ValueError("mqstore write: " + "; ".join(problems))
