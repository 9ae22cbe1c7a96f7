"""The race API (`append`, `get_range`) and its read cache, on top of `put` and `get`."""

from .store import RaceStore

__all__ = ["RaceStore"]
