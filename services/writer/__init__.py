"""commitlog-writer: the only process that appends to `commitlog/`."""
