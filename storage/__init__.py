"""mqstore's storage engine: RocketMQ-compatible commit log, pool, flush, recovery.

No asyncio, no HTTP: the services, the operator and the Spark pipeline build on this.
The public API is re-exported here.
"""

from .checkpoint import CheckpointState
from .config import FlushMode, PreallocateMethod, StoreConfig
from .errors import (
    AppendError,
    BufferPoolExhausted,
    ConfigError,
    MessageIllegalError,
    RangeReadTimeoutError,
    ReplicationGapError,
    SegmentCreateError,
    StoreClosedError,
    StoreError,
    StoreFormatError,
    StoreLockedError,
    TopicNameError,
)
from .message import Message, PutResult, PutStatus, StoredMessage
from .read_cache import ReadCacheStats
from .reads import GetResult, GetStatus, NoRecordError
from .record import SysFlag
from .recovery import RecoveryMode, RecoveryReport
from .roles import BrokerRole
from .stats import StoreStats
from .store import MessageStore
from .topic import validate_topic

__all__ = [
    "AppendError",
    "BrokerRole",
    "BufferPoolExhausted",
    "CheckpointState",
    "ConfigError",
    "FlushMode",
    "GetResult",
    "GetStatus",
    "Message",
    "MessageIllegalError",
    "MessageStore",
    "NoRecordError",
    "PreallocateMethod",
    "PutResult",
    "PutStatus",
    "RangeReadTimeoutError",
    "ReadCacheStats",
    "RecoveryMode",
    "RecoveryReport",
    "ReplicationGapError",
    "SegmentCreateError",
    "StoreClosedError",
    "StoreConfig",
    "StoreError",
    "StoreFormatError",
    "StoreLockedError",
    "StoreStats",
    "StoredMessage",
    "SysFlag",
    "TopicNameError",
    "validate_topic",
]
