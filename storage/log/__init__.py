"""The commit log's write side: the segment list, the segment allocator, the transient
store pool, the put path, commit and flush (group commit), acknowledgements, the published
positions, retention, and the read-only mapping other readers use."""
