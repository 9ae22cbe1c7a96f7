"""The race API (`append`, `get_range`) and its read cache, on top of `put` and `get`."""
