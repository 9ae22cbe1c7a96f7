"""Which handler answers which request code; everything else is REQUEST_CODE_NOT_SUPPORTED."""

from __future__ import annotations

from mqstore.services.notifier.remoting import (
    admin,
    broker_config,
    clients,
    codes,
    filters,
    offsets,
    pulls,
    queries,
    reply,
    retries,
    route,
    send,
    transactions,
)
from mqstore.services.notifier.remoting.context import Handler

HANDLERS: dict[int, Handler] = {
    # name server
    codes.GET_ROUTEINFO_BY_TOPIC: route.get_route,
    codes.GET_BROKER_CLUSTER_INFO: route.get_cluster_info,
    codes.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: route.get_topic_list,
    codes.GET_TOPICS_BY_CLUSTER: route.get_topic_list,
    codes.DELETE_TOPIC_IN_NAMESRV: route.delete_topic,
    # sends and pulls
    codes.SEND_MESSAGE: send.send,
    codes.SEND_MESSAGE_V2: send.send,
    codes.SEND_BATCH_MESSAGE: send.send,
    codes.SEND_REPLY_MESSAGE: reply.send_reply,
    codes.SEND_REPLY_MESSAGE_V2: reply.send_reply,
    codes.PULL_MESSAGE: pulls.pull,
    codes.LITE_PULL_MESSAGE: pulls.pull,
    codes.CONSUMER_SEND_MSG_BACK: retries.send_back,
    codes.END_TRANSACTION: transactions.end_transaction,
    # offsets
    codes.QUERY_CONSUMER_OFFSET: offsets.query_consumer_offset,
    codes.UPDATE_CONSUMER_OFFSET: offsets.update_consumer_offset,
    codes.SEARCH_OFFSET_BY_TIMESTAMP: offsets.search_offset,
    codes.GET_MAX_OFFSET: offsets.max_offset,
    codes.GET_MIN_OFFSET: offsets.min_offset,
    codes.GET_EARLIEST_MSG_STORETIME: offsets.earliest_store_time,
    # clients
    codes.HEART_BEAT: clients.heartbeat,
    codes.UNREGISTER_CLIENT: clients.unregister,
    codes.GET_CONSUMER_LIST_BY_GROUP: clients.consumer_list,
    codes.LOCK_BATCH_MQ: clients.lock_batch,
    codes.UNLOCK_BATCH_MQ: clients.unlock_batch,
    codes.CHECK_CLIENT_CONFIG: filters.check_client_config,
    codes.GET_CONSUMER_CONNECTION_LIST: clients.connection_list,
    codes.QUERY_TOPIC_CONSUME_BY_WHO: clients.consumed_by,
    # lookups
    codes.QUERY_MESSAGE: queries.query_message,
    codes.VIEW_MESSAGE_BY_ID: queries.view_by_id,
    # administration
    codes.UPDATE_AND_CREATE_TOPIC: admin.create_topic,
    codes.DELETE_TOPIC_IN_BROKER: route.delete_topic,
    codes.GET_ALL_TOPIC_CONFIG: admin.all_topic_config,
    codes.GET_TOPIC_CONFIG: admin.topic_config,
    codes.GET_TOPIC_STATS_INFO: admin.topic_stats,
    codes.GET_CONSUME_STATS: admin.consume_stats,
    codes.INVOKE_BROKER_TO_RESET_OFFSET: admin.reset_offset,
    codes.GET_BROKER_RUNTIME_INFO: admin.runtime_info,
    codes.UPDATE_BROKER_CONFIG: broker_config.update_broker_config,
    codes.GET_BROKER_CONFIG: broker_config.get_broker_config,
}
