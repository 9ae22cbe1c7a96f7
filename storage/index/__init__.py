"""The hash index (RocketMQ `IndexService`): lookups by key over the index files."""
