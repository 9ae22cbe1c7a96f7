"""Dispatch (RocketMQ's reput): tails the commit log and builds consume queues and the
index; the indexer that runs it in the store's process or in a process of its own."""
