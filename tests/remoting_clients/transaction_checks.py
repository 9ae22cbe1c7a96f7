"""The transaction check timing both systems under test run with: a check pass every 2 s, of
halves older than 4 s.

RocketMQ 5.5.0 checks every 30 s (`transactionCheckInterval`) the halves older than 6 s
(`transactionTimeOut`): an UNKNOW transaction would wait half a minute for its check.  With
these, the Java scenario `transaction` (Transactions.java) sees it checked and committed in
a few seconds.  RocketMQ gets them as broker properties (rocketmq_peer.py), mqstore as the
settings `remoting.transaction_check_interval_ms` and `remoting.transaction_timeout_ms`
(the environment variables below, conftest.py).

RocketMQ writes the op messages that end halves in batches, every `transactionOpBatchInterval`
(3 s): a check pass before the batch is written asks again about halves already ended, and a
second commit answer delivers the message twice (seen with a 1 s timeout, and with a 2 s
interval after a check's commit).  So RocketMQ also gets a 500 ms batch interval, well below
the check interval; mqstore writes each op message at once.
"""

from __future__ import annotations

CHECK_INTERVAL_MS = 2_000
TIMEOUT_MS = 4_000
OP_BATCH_INTERVAL_MS = 500
TRANSACTION_CHECK_PROPERTIES = {"transactionCheckInterval": CHECK_INTERVAL_MS,
                                "transactionTimeOut": TIMEOUT_MS,
                                "transactionOpBatchInterval": OP_BATCH_INTERVAL_MS}
MQSTORE_TRANSACTION_ENV = {
    "MQSTORE_REMOTING__TRANSACTION_CHECK_INTERVAL_MS": str(CHECK_INTERVAL_MS),
    "MQSTORE_REMOTING__TRANSACTION_TIMEOUT_MS": str(TIMEOUT_MS)}
