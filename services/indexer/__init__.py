"""reput/indexer: tails the published commit log, builds consume queues and the index."""
