"""RocketMQ's remoting codes: the request codes served here, the response codes answered.

Numbers are RocketMQ's `RequestCode` / `ResponseCode` (4.9.4 and 5.x agree on every code
used here; the 209-211 responses that changed meaning are never sent).
"""

from __future__ import annotations

# -- request codes: broker -----------------------------------------------------------------
SEND_MESSAGE = 10
PULL_MESSAGE = 11
QUERY_MESSAGE = 12
QUERY_CONSUMER_OFFSET = 14
UPDATE_CONSUMER_OFFSET = 15
UPDATE_AND_CREATE_TOPIC = 17
GET_ALL_TOPIC_CONFIG = 21
UPDATE_BROKER_CONFIG = 25
GET_BROKER_CONFIG = 26
GET_BROKER_RUNTIME_INFO = 28
SEARCH_OFFSET_BY_TIMESTAMP = 29
GET_MAX_OFFSET = 30
GET_MIN_OFFSET = 31
GET_EARLIEST_MSG_STORETIME = 32
VIEW_MESSAGE_BY_ID = 33
HEART_BEAT = 34
UNREGISTER_CLIENT = 35
CONSUMER_SEND_MSG_BACK = 36
END_TRANSACTION = 37
GET_CONSUMER_LIST_BY_GROUP = 38
LOCK_BATCH_MQ = 41
UNLOCK_BATCH_MQ = 42
CHECK_CLIENT_CONFIG = 46
GET_TOPIC_STATS_INFO = 202
GET_CONSUMER_CONNECTION_LIST = 203
GET_CONSUME_STATS = 208
DELETE_TOPIC_IN_BROKER = 215
INVOKE_BROKER_TO_RESET_OFFSET = 222
QUERY_TOPIC_CONSUME_BY_WHO = 300
SEND_MESSAGE_V2 = 310
SEND_BATCH_MESSAGE = 320
SEND_REPLY_MESSAGE = 324
SEND_REPLY_MESSAGE_V2 = 325
GET_TOPIC_CONFIG = 351
LITE_PULL_MESSAGE = 361

# -- request codes: name server --------------------------------------------------------------
GET_ROUTEINFO_BY_TOPIC = 105
GET_BROKER_CLUSTER_INFO = 106
GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
DELETE_TOPIC_IN_NAMESRV = 216
GET_TOPICS_BY_CLUSTER = 224

# -- broker to client (sent, never served) ---------------------------------------------------
CHECK_TRANSACTION_STATE = 39
NOTIFY_CONSUMER_IDS_CHANGED = 40
RESET_CONSUMER_CLIENT_OFFSET = 220
PUSH_REPLY_MESSAGE_TO_CLIENT = 326

# -- response codes --------------------------------------------------------------------------
SUCCESS = 0
SYSTEM_ERROR = 1
SYSTEM_BUSY = 2
REQUEST_CODE_NOT_SUPPORTED = 3
FLUSH_DISK_TIMEOUT = 10
SLAVE_NOT_AVAILABLE = 11
FLUSH_SLAVE_TIMEOUT = 12
MESSAGE_ILLEGAL = 13
SERVICE_NOT_AVAILABLE = 14
NO_PERMISSION = 16
TOPIC_NOT_EXIST = 17
PULL_NOT_FOUND = 19
PULL_RETRY_IMMEDIATELY = 20
PULL_OFFSET_MOVED = 21
QUERY_NOT_FOUND = 22
SUBSCRIPTION_PARSE_FAILED = 23
SUBSCRIPTION_NOT_EXIST = 24
SUBSCRIPTION_NOT_LATEST = 25
FILTER_DATA_NOT_EXIST = 27
INVALID_PARAMETER = 29
CONSUMER_NOT_ONLINE = 206
ILLEGAL_OPERATION = 604

# -- header flag bits ------------------------------------------------------------------------
FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2

LANGUAGES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP",
             "GO", "PHP", "OMS", "RUST", "NODE_JS")
"""RocketMQ `LanguageCode`: the index is the byte of a binary header."""
LANGUAGE_CODES = {name: code for code, name in enumerate(LANGUAGES)}

SERVER_VERSION = 401
"""The `version` of every answer (V4_9_4): clients record it as the broker's version, and
it is above 232, below which a 4.x client refuses SQL92 filters."""


class RemotingError(Exception):
    """A request refused with a RocketMQ response code and a remark naming the problem."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def not_supported(code: int) -> RemotingError:
    return RemotingError(REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported")
