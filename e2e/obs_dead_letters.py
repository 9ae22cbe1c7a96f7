"""`DeadLetters`: a consumer whose every message ends in its group's dead letter queue, for
the DLQ alert.

What a RocketMQ push consumer does when CONSUMER_SEND_MSG_BACK is not served and it has
failed a message past its `maxReconsumeTimes`: it sends the message to `%RETRY%<group>`
itself (SEND_MESSAGE_V2, the `RETRY_TOPIC` property, its reconsume times in the header), and
the front routes that send to `%DLQ%<group>` (services/notifier/remoting/retries.py,
`dead_letter_if_spent`).  One such send every `pause_s`, over the pod's remoting port, with
the tests' remoting client (tests/remoting/client.py), until stop().
"""

from __future__ import annotations

import asyncio
import json
import threading

from mqstore.services.notifier.remoting import codes
from tests.remoting.client import RemotingClient, properties, send_header

from .obs_stack import TOPIC, Pod

GROUP = "obs-dlq"
MAX_RECONSUME_TIMES = 2
"""The consumer's max: its send carries one reconsume time more, so it is a dead letter."""


class DeadLetters:
    def __init__(self, pod: Pod, *, pause_s: float = 0.5) -> None:
        self.pod = pod
        self.pause_s = pause_s
        self.statuses: dict[str, int] = {}
        """Answers by code, as the workloads count put statuses: SUCCESS (stored in the
        DLQ) or CODE_<n>."""
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._send()), daemon=True)

    def start(self) -> DeadLetters:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    async def _send(self) -> None:
        port = json.loads(self.pod.config.read_text())["remoting"]["port"]
        client = await RemotingClient.connect(f"127.0.0.1:{port}")
        header = {**send_header(f"%RETRY%{GROUP}", 0, props=properties(RETRY_TOPIC=TOPIC)),
                  "j": str(MAX_RECONSUME_TIMES + 1), "l": str(MAX_RECONSUME_TIMES)}
        try:
            while not self._stop.is_set():
                try:
                    answer = await client.request(codes.SEND_MESSAGE_V2, header, b"poison")
                except (OSError, TimeoutError) as error:
                    self.errors.append(repr(error))
                else:
                    name = "SUCCESS" if answer.code == codes.SUCCESS else f"CODE_{answer.code}"
                    self.statuses[name] = self.statuses.get(name, 0) + 1
                await asyncio.sleep(self.pause_s)
        finally:
            await client.close()
