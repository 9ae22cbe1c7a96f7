"""Replication on the engine's side: whole-record chunks, followers' progress and the
sync master's waiting puts.  No sockets (those are the writer service's)."""
