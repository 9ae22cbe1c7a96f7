"""`RemotingSends`: one RocketMQ send every `pause_s` over a pod's remoting port, with the
tests' remoting client (tests/remoting/client.py), until stop(); for the alerts whose cause
is what clients send:

* `dead_letters(pod)`: what a RocketMQ push consumer does when CONSUMER_SEND_MSG_BACK is not
  served and it has failed a message past its `maxReconsumeTimes`: it sends the message to
  `%RETRY%<group>` itself (SEND_MESSAGE_V2, the `RETRY_TOPIC` property, its reconsume times
  in the header), and the front routes that send to `%DLQ%<group>`
  (services/notifier/remoting/retries.py, `dead_letter_if_spent`): the DLQ alert.
* `abandoned_transactions(pod)`: a transactional producer that sends half messages and then
  never ends them nor answers a check (it never registers, so the check service finds no
  producer to ask): past `remoting.transaction_check_max` checks each half is discarded to
  `TRANS_CHECK_MAX_TIME_TOPIC` (services/notifier/remoting/transaction_check.py).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

from mqstore.services.notifier.remoting import codes
from tests.remoting.client import RemotingClient, properties, send_header

from .obs_stack import TOPIC, Pod

DLQ_GROUP = "obs-dlq"
MAX_RECONSUME_TIMES = 2
"""The consumer's max: its send carries one reconsume time more, so it is a dead letter."""
TRANSACTION_GROUP = "obs-txn"
TRANSACTION_PREPARED_SYSFLAG = 0x4


def dead_letters(pod: Pod) -> RemotingSends:
    header = {**send_header(f"%RETRY%{DLQ_GROUP}", 0, props=properties(RETRY_TOPIC=TOPIC)),
              "j": str(MAX_RECONSUME_TIMES + 1), "l": str(MAX_RECONSUME_TIMES)}
    return RemotingSends(pod, header)


def abandoned_transactions(pod: Pod) -> RemotingSends:
    return RemotingSends(pod, send_header(TOPIC, 0, sysflag=TRANSACTION_PREPARED_SYSFLAG,
                                          props=properties(TRAN_MSG="true",
                                                           PGROUP=TRANSACTION_GROUP)))


class RemotingSends:
    def __init__(self, pod: Pod, header: dict[str, str], *, pause_s: float = 0.5) -> None:
        self.pod = pod
        self.header = header
        self.pause_s = pause_s
        self.statuses: dict[str, int] = {}
        """Answers by code, as the workloads count put statuses: SUCCESS or CODE_<n>."""
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._send()), daemon=True)

    def start(self) -> RemotingSends:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    async def _send(self) -> None:
        port = json.loads(self.pod.config.read_text())["remoting"]["port"]
        client = await RemotingClient.connect(f"127.0.0.1:{port}")
        try:
            while not self._stop.is_set():
                try:
                    # Each send's born time is its own: a half's age counts from it.
                    header = {**self.header, "g": str(int(time.time() * 1000))}
                    answer = await client.request(codes.SEND_MESSAGE_V2, header, b"poison")
                except (OSError, TimeoutError) as error:
                    self.errors.append(repr(error))
                else:
                    name = "SUCCESS" if answer.code == codes.SUCCESS else f"CODE_{answer.code}"
                    self.statuses[name] = self.statuses.get(name, 0) + 1
                await asyncio.sleep(self.pause_s)
        finally:
            await client.close()
