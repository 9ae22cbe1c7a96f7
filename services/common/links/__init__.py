"""The binary TCP links between processes: framing.py (the one length-prefixed frame reader
and flow-controlled writer of the remoting front, the forward listener and the front's link
to it), forward_wire.py (the forward link's requests and answers), forward_secret.py (its
credential) and mutual_proof.py (the handshake it shares with replication)."""
