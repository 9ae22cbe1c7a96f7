"""The `mqstore admin` argparse tree and its one handler, `run`.

    mqstore admin topics list | describe TOPIC | create TOPIC [--queues N] | delete TOPIC
    mqstore admin groups list | describe GROUP [--topic T]
                        | reset GROUP --topic T (--offset N | --time ISO | --timestamp-ms MS)
    mqstore admin messages key TOPIC KEY | id MSG_ID | offset TOPIC QUEUE OFFSET
    mqstore admin retries [--group G] | delays | transactions
    mqstore admin status

Every leaf takes the same options (where the services are, the keys to sign with, the output
form), so they may follow the command as users write them: `mqstore admin topics list
--output json`.  Exit codes: 0 done; 2 bad input or a 4xx answer (one line naming the
server's reason); 1 a service that does not answer or fails (5xx), or `status` with a
service not ready.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mqstore.services.admin import groups, messages, retries, status, topics
from mqstore.services.admin.client import EXIT_FAILED, AdminClient, AdminError
from mqstore.services.admin.context import Admin
from mqstore.services.admin.endpoints import find_endpoints
from mqstore.services.admin.output import OUTPUTS, Report, show
from mqstore.services.auth.http_signature import signer_for

EXIT_INTERRUPTED = 130
"""The shell's code for a command ended by SIGINT (128 + 2)."""
ACCESS_KEY_ENV = "MQSTORE_ACCESS_KEY"
SECRET_KEY_ENV = "MQSTORE_SECRET_KEY"
TIMEOUT_MS_DEFAULT = 10_000
"""One call's connect-and-answer bound: every admin route answers from memory or one small
file, in milliseconds; 10 s covers a busy machine without hanging a script on a dead one."""

Action = Callable[[Admin, argparse.Namespace], Report]
if TYPE_CHECKING:  # argparse's class is generic only to the type checker
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def add_admin(commands: SubParsers) -> None:
    """Register `mqstore admin` on the CLI's subcommands (services/cli/command.py)."""
    admin = commands.add_parser(
        "admin", help="administer running services: topics, groups, messages, retries, "
                      "delays, transactions, status (see mqstore admin -h; docs/admin.md)",
        description="Administer a running deployment over the services' HTTP APIs "
                    "(docs/admin.md names the call each command makes).")
    areas = admin.add_subparsers(dest="admin_area", required=True, metavar="AREA")
    common = _common_options()
    _add_topics(areas, common)
    _add_groups(areas, common)
    _add_messages(areas, common)
    _leaf(areas, "retries", common, "each group's retry and dead letter topics with their "
          "message counts (GET /v1/retries)",
          lambda admin, a: retries.retries(admin, group=a.group)).add_argument(
              "--group", help="only this consumer group (default: every group with one)")
    _leaf(areas, "delays", common, "messages waiting per delay level (GET /v1/delays)",
          lambda admin, a: retries.delays(admin))
    _leaf(areas, "transactions", common, "half messages of transactions and the check's "
          "progress (GET /v1/transactions)", lambda admin, a: retries.transactions(admin))
    leaf = areas.add_parser("status", parents=[common], help="readiness of each service, "
                            "replication, dispatch")
    leaf.set_defaults(handler=run, admin_action=None)


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_argument_group("where the services are (default: mqstore up's)")
    where.add_argument("--url", metavar="URL", help="the notifier (default "
                       "http://127.0.0.1:8083, or the --config file's)")
    where.add_argument("--writer-url", metavar="URL", help="the writer (status only; default "
                       "http://127.0.0.1:8081)")
    where.add_argument("--indexer-url", metavar="URL", help="the indexer (status only; "
                       "default http://127.0.0.1:8082)")
    where.add_argument("--config", type=Path, metavar="FILE", help="the services' YAML config "
                       "file: each service's host and port, https with its tls section")
    where.add_argument("--timeout-ms", type=int, default=TIMEOUT_MS_DEFAULT, metavar="MS",
                       help=f"one call's bound (default {TIMEOUT_MS_DEFAULT})")
    keys = common.add_argument_group("credentials (when the services run with a users file)")
    keys.add_argument("--access-key", default=os.environ.get(ACCESS_KEY_ENV),
                      help=f"sign requests as this account (default ${ACCESS_KEY_ENV})")
    keys.add_argument("--secret-key", default=os.environ.get(SECRET_KEY_ENV),
                      help=f"its secret key (default ${SECRET_KEY_ENV}; prefer the "
                           f"variable: a command line is visible to other users)")
    common.add_argument("--output", choices=OUTPUTS, default="table",
                        help="a table (default) or the services' JSON")
    return common


def _leaf(parent: SubParsers, name: str, common: argparse.ArgumentParser, help_text: str,
          action: Action) -> argparse.ArgumentParser:
    leaf = parent.add_parser(name, parents=[common], help=help_text, description=help_text)
    leaf.set_defaults(handler=run, admin_action=action)
    return leaf


def _add_topics(areas: SubParsers, common: argparse.ArgumentParser) -> None:
    area = areas.add_parser("topics", help="list, describe, create, delete topics")
    verbs = area.add_subparsers(dest="admin_verb", required=True, metavar="VERB")
    _leaf(verbs, "list", common, "the topics (GET /v1/topics)",
          lambda admin, a: topics.list_topics(admin))
    _leaf(verbs, "describe", common, "a topic's queues: min and max offsets, messages "
          "(GET /v1/topics/{topic}/queues)",
          lambda admin, a: topics.describe_topic(admin, a.topic)).add_argument(
              "topic", help="the topic's name")
    create = _leaf(verbs, "create", common, "create a topic (PUT /v1/topics/{topic})",
                   lambda admin, a: topics.create_topic(admin, a.topic,
                                                        queue_count=a.queues))
    create.add_argument("topic", help="the new topic's name")
    create.add_argument("--queues", type=_positive_int, metavar="N", help="its queue count, "
                        "1..writer.topic_queue_count (default: all of them)")
    _leaf(verbs, "delete", common, "delete a topic (DELETE /v1/topics/{topic})",
          lambda admin, a: topics.delete_topic(admin, a.topic)).add_argument(
              "topic", help="the topic's name")


def _add_groups(areas: SubParsers, common: argparse.ArgumentParser) -> None:
    area = areas.add_parser("groups", help="list groups, show their lag, reset their offsets")
    verbs = area.add_subparsers(dest="admin_verb", required=True, metavar="VERB")
    _leaf(verbs, "list", common, "groups with committed offsets (GET /v1/groups)",
          lambda admin, a: groups.list_groups(admin))
    describe = _leaf(verbs, "describe", common, "a group's committed offset, max offset and "
                     "lag per queue", lambda admin, a: groups.describe_group(
                         admin, a.group, topic=a.topic))
    describe.add_argument("group", help="the consumer group's name")
    describe.add_argument("--topic", help="only this topic (default: every topic the group "
                          "committed on)")
    reset = _leaf(verbs, "reset", common, "set a group's offsets on a topic to an offset or a "
                  "time (POST /v1/groups/{group}/offsets with reset)", _reset)
    reset.add_argument("group", help="the consumer group's name")
    reset.add_argument("--topic", required=True, help="the topic whose offsets to set")
    reset.add_argument("--queue", type=_non_negative_int, metavar="Q",
                       help="only this queue (default: every queue of the topic)")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--offset", type=_non_negative_int, metavar="N", help="this queue offset "
                    "(clamped to each queue's [min, max])")
    to.add_argument("--time", type=_timestamp_ms, dest="timestamp_ms", metavar="ISO",
                    help="the first message stored at or after this time, ISO 8601 "
                         "(2026-11-25T04:00:00Z; without a zone, UTC)")
    to.add_argument("--timestamp-ms", type=_non_negative_int, dest="timestamp_ms",
                    metavar="MS", help="the same, as Unix milliseconds")


def _reset(admin: Admin, arguments: argparse.Namespace) -> Report:
    return groups.reset_group(admin, arguments.group, topic=arguments.topic,
                              queue_id=arguments.queue, offset=arguments.offset,
                              timestamp_ms=arguments.timestamp_ms)


def _add_messages(areas: SubParsers, common: argparse.ArgumentParser) -> None:
    area = areas.add_parser("messages", help="find messages by key, msg id or queue offset")
    verbs = area.add_subparsers(dest="admin_verb", required=True, metavar="VERB")
    key = _leaf(verbs, "key", common, "messages of a topic with a key "
                "(GET /v1/topics/{topic}/messages?key=)",
                lambda admin, a: messages.by_key(admin, a.topic, a.key, begin_ms=a.begin_ms,
                                                 end_ms=a.end_ms, max_messages=a.max_messages))
    key.add_argument("topic", help="the topic's name")
    key.add_argument("key", help="one key, exact (no spaces)")
    key.add_argument("--begin-ms", type=_non_negative_int, help="stored at or after "
                     "(Unix ms; default 0)")
    key.add_argument("--end-ms", type=_non_negative_int, help="stored at or before "
                     "(Unix ms; default: no end)")
    key.add_argument("--max-messages", type=_positive_int, help="at most this many "
                     "(default: the notifier's index_query_results_max)")
    _leaf(verbs, "id", common, "the message with a msg id (GET /v1/messages/{position})",
          lambda admin, a: messages.by_id(admin, a.msg_id)).add_argument(
              "msg_id", help="32 hex digits (56 with an IPv6 store host)")
    offset = _leaf(verbs, "offset", common, "the message at a queue offset "
                   "(GET /v1/topics/{topic}/queues/{q}/messages?offset=)",
                   lambda admin, a: messages.by_offset(admin, a.topic, a.queue, a.offset))
    offset.add_argument("topic", help="the topic's name")
    offset.add_argument("queue", type=_non_negative_int, help="the queue id")
    offset.add_argument("offset", type=_non_negative_int, help="the queue offset")


def run(arguments: argparse.Namespace) -> int:
    """The handler of every `mqstore admin` leaf: one line on stderr for an error."""
    try:
        admin = _admin(arguments)
        if arguments.admin_action is None:
            report, ready = status.broker_status(admin)
            _show(report, arguments.output)
            return 0 if ready else EXIT_FAILED
        _show(arguments.admin_action(admin, arguments), arguments.output)
        return 0
    except AdminError as error:
        print(f"mqstore admin: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:  # Ctrl-C during a call: nothing to clean up, no traceback
        print("mqstore admin: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _admin(arguments: argparse.Namespace) -> Admin:
    if arguments.timeout_ms <= 0:
        raise AdminError(f"--timeout-ms must be positive, got {arguments.timeout_ms}")
    try:
        signer = signer_for(arguments.access_key, arguments.secret_key)
    except ValueError:
        raise AdminError("give both --access-key and --secret-key (or "
                         f"${ACCESS_KEY_ENV} and ${SECRET_KEY_ENV}), or neither") from None
    endpoints = find_endpoints(config=arguments.config, notifier_url=arguments.url,
                               writer_url=arguments.writer_url,
                               indexer_url=arguments.indexer_url)
    return Admin(AdminClient(timeout_ms=arguments.timeout_ms, signer=signer,
                             ssl_context=endpoints.ssl_context), endpoints)


def _show(report: Report, output: str) -> None:
    try:
        show(report, output=output, say=print)
        sys.stdout.flush()
    except BrokenPipeError:
        # `| head`: the reader has what it wanted; say nothing more to a closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def _non_negative_int(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 0")
    return int(text)


def _timestamp_ms(text: str) -> int:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 time "
                                         f"(2026-11-25T04:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return max(0, int(moment.timestamp() * 1000))
