"""The streaming reader's own options (stream_reader.py lists them all)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from mqstore.storage.config_text import parse_bool

from .stream_offsets import Offsets, offsets_from_json

STARTING_OFFSETS_DEFAULT = "latest"
"""As Kafka's source: a new query reads what arrives from now on, unless told otherwise."""


@dataclasses.dataclass(frozen=True)
class StreamSettings:
    starting_offsets: str | Offsets = STARTING_OFFSETS_DEFAULT
    max_messages_per_trigger: int | None = None
    fail_on_data_loss: bool = True


def parse_stream_settings(options: Mapping[str, str]) -> StreamSettings:
    lowered = {key.lower(): value for key, value in options.items()}
    starting_text = lowered.get("startingoffsets", STARTING_OFFSETS_DEFAULT).strip()
    starting: str | Offsets
    if starting_text.lower() in ("earliest", "latest"):
        starting = starting_text.lower()
    else:
        starting = offsets_from_json(starting_text, allow_special=True,
                                     what="startingOffsets (earliest, latest or JSON)")
    rows_text = lowered.get("maxmessagespertrigger")
    rows = None
    if rows_text is not None:
        if not rows_text.strip().isdigit() or int(rows_text) < 1:
            raise ValueError(f"maxMessagesPerTrigger={rows_text!r}: expected a positive integer")
        rows = int(rows_text)
    fail_on_data_loss = parse_bool(lowered.get("failondataloss", "true"),
                                   where="failOnDataLoss")
    return StreamSettings(starting_offsets=starting, max_messages_per_trigger=rows,
                          fail_on_data_loss=fail_on_data_loss)
