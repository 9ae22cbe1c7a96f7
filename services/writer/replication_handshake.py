"""The replication handshake: a follower proves it holds the replication secret before the
master sends it any log byte, and the master proves the same to the follower.

Both sides hold one secret (`replication.secret_file`).  The exchange is
services/common/links/mutual_proof.py's (magic b"MQRH", the master listening, the follower
dialing), as plain bytes before the stream of RocketMQ's HA layout
(replication_protocol.py): then the follower, having checked the master's proof, sends its
first report and the stream runs as before.  Without a secret (allowed only on a loopback
listener, services/common/settings/replication.py) the key is empty: the exchange then
proves nothing, but both sides run one code path.
"""

from __future__ import annotations

from mqstore.services.common.links.mutual_proof import MutualProof

REPLICATION = MutualProof(
    magic=b"MQRH", listener="master", dialer="follower",
    port_hint="is the address the master's replication port, and both sides this version?")
