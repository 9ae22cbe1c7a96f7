"""Reads: pulls with RocketMQ's statuses, lookups by position, key and time, over the
store's own files or, read-only, over a directory other processes write."""
