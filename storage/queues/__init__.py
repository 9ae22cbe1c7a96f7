"""Consume queues: one per (topic, queue id), 20-byte entries built by dispatch."""
