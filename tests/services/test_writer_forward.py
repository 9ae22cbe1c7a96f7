"""The writer's forward listener: sends the remoting front forwards, stored as they arrived,
and the malformed ones refused with MESSAGE_ILLEGAL and the reason."""

from __future__ import annotations

from mqstore.services.common.links.forward_secret import prove_front, read_secret, secret_path
from mqstore.services.common.links.forward_wire import (
    KIND_BATCH,
    KIND_SINGLE,
    ForwardRequest,
    decode_answer,
    encode_request,
)
from mqstore.services.common.links.framing import FramedStream, FrameLimits, open_framed_connection
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer.app import PRODUCE, create_app
from mqstore.services.writer.forward_server import ForwardServer
from mqstore.storage import MessageStore
from tests.remoting.client import batch_body, properties
from tests.services.serving import run

LIMITS = FrameLimits(frame_size_bytes_max=1 << 20, frame_read_timeout_ms=5_000,
                     write_buffer_bytes_max=1 << 20, write_drain_timeout_ms=5_000)


def _request(kind: int, body: bytes, *, props: bytes = b"", queue_id: int = 1) -> ForwardRequest:
    return ForwardRequest(0, kind, queue_id, 0x1, 7, 1_700_000_000_000, 2, "10.0.0.1:5000",
                          "Orders", props, body)


def _server(store: MessageStore) -> ForwardServer:
    settings = WriterSettings(forward_port=0)
    return ForwardServer(create_app(store, settings)[PRODUCE], settings)


def test_one_message_is_stored_with_the_clients_fields(store: MessageStore) -> None:
    props = properties(TAGS="red", UNIQ_KEY="AB" * 16).encode()
    answer = run(lambda: _server(store).store(_request(KIND_SINGLE, b"zipped", props=props)))
    assert (answer.status, len(answer.results)) == ("PUT_OK", 1)
    stored = store.message_at(answer.results[0][1])
    assert (bytes(stored.body), stored.sysflag, stored.flag, stored.reconsume_times) == \
        (b"zipped", 0x1, 7, 2)
    assert (stored.born_host, stored.born_timestamp_ms) == ("10.0.0.1:5000", 1_700_000_000_000)
    assert stored.properties == {"TAGS": "red", "UNIQ_KEY": "AB" * 16}


def test_a_batch_keeps_each_entrys_properties_before_the_batchs(store: MessageStore) -> None:
    entries = [(b"one", properties(UNIQ_KEY="01")), (b"two", "UNIQ_KEY\x0102")]
    outer = properties(WAIT="true", UNIQ_KEY="FF").encode()
    answer = run(lambda: _server(store).store(_request(KIND_BATCH, batch_body(entries),
                                                       props=outer)))
    assert [row[0] for row in answer.results] == [0, 1]
    stored = [store.message_at(row[1]) for row in answer.results]
    assert [bytes(m.body) for m in stored] == [b"one", b"two"]
    assert [m.properties for m in stored] == [{"UNIQ_KEY": "01", "WAIT": "true"},
                                              {"UNIQ_KEY": "02", "WAIT": "true"}]


def test_malformed_batches_and_queues_are_refused_with_the_reason(store: MessageStore) -> None:
    good = batch_body([(b"one", "")])
    cases = {
        "runs past the batch": good[:-1] + b"",
        "20-byte head": good + b"\0\0\0",
        "holds no message": b"",
        "must be in 0..7": None,
    }
    server = _server(store)
    for reason, body in cases.items():
        request = (_request(KIND_SINGLE, b"x", queue_id=8) if body is None
                   else _request(KIND_BATCH, body))
        answer = run(lambda request=request: server.store(request))
        assert answer.status == "MESSAGE_ILLEGAL", reason
        assert reason in answer.reason
    assert store.committed_position == 0  # nothing of any of them was stored


def test_answers_come_back_over_the_listener(store: MessageStore) -> None:
    async def scenario() -> list[int]:
        server = _server(store)
        port = await server.start(data_dir=store.directory)
        reader, writer = await open_framed_connection("127.0.0.1", port)
        await prove_front(FramedStream(reader, writer, LIMITS),
                          read_secret(secret_path(store.directory)))
        for request_id in (5, 6):
            writer.writelines(encode_request(_request(KIND_SINGLE, b"m")._replace(
                request_id=request_id)))
        ids = []
        for _ in range(2):
            length = int.from_bytes(await reader.readexactly(4), "big")
            ids.append(decode_answer(await reader.readexactly(length)).request_id)
        writer.close()
        await server.close()
        return sorted(ids)

    assert run(scenario) == [5, 6]
