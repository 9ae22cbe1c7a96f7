"""The notifier's topic administration: create and delete topics over HTTP.

    PUT    /v1/topics/{topic}      create it (?queue_count=, default the writer's
                                   topic_queue_count queues)
    DELETE /v1/topics/{topic}      delete it

The notifier owns `config/topics.json` (services/notifier/remoting/topics.py: the remoting front
keeps the same table, and `mqadmin updateTopic` / `deleteTopic` change it too).  What a
deletion does across the processes of one volume:

* the topic is marked deleted in the file and drops out of routes and `GET /v1/topics`;
* the writer reads the file and refuses produces to it (404 TOPIC_NOT_EXIST, remoting 17)
  within `topics.topics_file_check_interval_ms` (100 ms);
* its records stay in the commit log, and its consume queues and group offsets on the
  volume, until retention takes them (a consumer already pulling it can still read them),
  and while it holds queues it counts against `topics.topics_max`.  docs/http-api.md says
  why the queues are not removed: a restarted writer learns its next offsets from them.

Creating it again (or, with `topics.auto_create` on, a send that auto-creates it) makes it
writable again; its queue offsets go on from where they were.
"""

from __future__ import annotations

from aiohttp import web

from mqstore.services.common.http.answers import ServiceError, json_response
from mqstore.services.common.topics.rules import is_system_topic
from mqstore.services.notifier.remoting.codes import MESSAGE_ILLEGAL, RemotingError
from mqstore.services.notifier.remoting.topics import PERM_READ_WRITE, TopicConfig, TopicTable
from mqstore.services.notifier.requests import check_topic, query_int


class TopicAdmin:
    def __init__(self, table: TopicTable, *, topic_bytes_max: int) -> None:
        self._table = table
        self._topic_bytes_max = topic_bytes_max

    async def create(self, request: web.Request) -> web.Response:
        """PUT /v1/topics/{topic}?queue_count=: idempotent (a second PUT sets the count it
        names); 403 for a system topic, 409 when the table holds `topics_max` topics already.
        `queue_count` (1..the writer's topic_queue_count, default all of them) is the topic's
        read and write queue count, as `mqadmin updateTopic -r -w` sets it: the routes the
        remoting front answers name that many queues."""
        topic = check_topic(request.match_info["topic"], size_bytes_max=self._topic_bytes_max)
        if is_system_topic(topic):
            raise ServiceError(403, "NO_PERMISSION", f"topic {topic} is a system topic")
        count = query_int(request, "queue_count", minimum=1, maximum=self.queue_count_max,
                          default=self.queue_count_max, setting="writer.topic_queue_count")
        try:
            self._table.create(TopicConfig(topic, count, count, PERM_READ_WRITE))
        except RemotingError as error:
            raise _http_error(error) from None
        return json_response({"topic": topic, "queue_count": count})

    async def delete(self, request: web.Request) -> web.Response:
        """DELETE /v1/topics/{topic}: 404 TOPIC_NOT_EXIST for a topic no table or queue
        knows (or a system topic), so the deleted list holds only topics that existed."""
        topic = check_topic(request.match_info["topic"], size_bytes_max=self._topic_bytes_max)
        if not self._table.delete(topic):
            raise ServiceError(404, "TOPIC_NOT_EXIST", f"topic {topic} does not exist")
        return json_response({"topic": topic, "deleted": True})

    @property
    def queue_count_max(self) -> int:
        """The writer's `topic_queue_count`: the most queues a topic may have."""
        return self._table.queue_count_max

    def names(self) -> list[str]:
        """Topics created or holding queues, less the deleted ones (GET /v1/topics)."""
        return self._table.names()


def _http_error(error: RemotingError) -> ServiceError:
    if error.code == MESSAGE_ILLEGAL:
        return ServiceError(400, "MESSAGE_ILLEGAL", error.remark)
    return ServiceError(409, "CONFLICT", error.remark)
