"""mqstore's storage engine: RocketMQ-compatible commit log, pool, flush, recovery.

No asyncio, no HTTP: the services, the operator and the Spark pipeline build on this.
The public API is re-exported here.
"""

from .config import CorruptionPolicy, FlushMode, PreallocateMethod, StoreConfig
from .errors import (
    BufferPoolExhausted,
    ConfigError,
    MessageIllegalError,
    ReplicationGapError,
    SegmentCreateError,
    Sql92ExpressionError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreFormatError,
    StoreLockedError,
    SubscriptionExpressionError,
    TopicNameError,
)
from .files.checkpoint import CheckpointState
from .format.message import Message, PutResult, PutStatus, StoredMessage
from .format.record import SysFlag
from .format.record_scan import Damage
from .format.subscription import parse_tags
from .format.topic import validate_topic
from .race.read_cache import ReadCacheStats
from .race.store import AppendError, RangeReadTimeoutError
from .reads.get import (
    CorruptRecordError,
    GetResult,
    GetStatus,
    NoRecordError,
    NotDispatchedError,
)
from .recovery.recovery import RecoveryMode, RecoveryReport
from .roles import BrokerRole
from .stats import StoreStats
from .store import MessageStore

__all__ = [
    "AppendError",
    "BrokerRole",
    "BufferPoolExhausted",
    "CheckpointState",
    "ConfigError",
    "CorruptRecordError",
    "CorruptionPolicy",
    "Damage",
    "FlushMode",
    "GetResult",
    "GetStatus",
    "Message",
    "MessageIllegalError",
    "MessageStore",
    "NoRecordError",
    "NotDispatchedError",
    "PreallocateMethod",
    "PutResult",
    "PutStatus",
    "RangeReadTimeoutError",
    "ReadCacheStats",
    "RecoveryMode",
    "RecoveryReport",
    "ReplicationGapError",
    "SegmentCreateError",
    "Sql92ExpressionError",
    "StoreClosedError",
    "StoreConfig",
    "StoreCorruptError",
    "StoreError",
    "StoreFormatError",
    "StoreLockedError",
    "StoreStats",
    "StoredMessage",
    "SubscriptionExpressionError",
    "SysFlag",
    "TopicNameError",
    "parse_tags",
    "validate_topic",
]
