"""Long polls (issue 17, Found 6): one client cannot hold every held-pull slot."""

from __future__ import annotations

from pathlib import Path

from mqstore.services.notifier.app import HELD
from tests.abuse.http_abuse import connect, get, read_answer, served, wait_until
from tests.services.notifier_stack import notifier_app, settings
from tests.services.serving import run

HELD_PULL = get("/v1/topics/T/queues/0/messages?offset=0&wait_ms=30000")


def test_one_clients_long_polls_leave_slots_for_another(tmp_path: Path) -> None:
    async def scenario() -> None:
        limits = settings(held_requests_max=3, held_requests_per_client_max=2)
        async with notifier_app(tmp_path, limits) as (_, app, _), served(app) as port:
            hostile = [await connect(port, client="127.0.0.2") for _ in range(3)]
            for _, writer in hostile[:2]:
                writer.write(HELD_PULL)
            await wait_until(lambda: app[HELD].held_count == 2, "two pulls held")
            reader, writer = hostile[2]
            writer.write(HELD_PULL)
            refused = await read_answer(reader)
            assert refused.status == 429
            assert "held_requests_per_client_max" in refused.body.decode()
            _, other = await connect(port, client="127.0.0.3")
            other.write(HELD_PULL)
            await wait_until(lambda: app[HELD].held_count == 3, "the other's pull held")
            for _, writer in [*hostile, (None, other)]:
                writer.close()

    run(scenario)
