"""Setting values checked against their dataclass field types: YAML values exactly (no silent
conversions); environment variable text goes through storage/config_text.py."""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Any

from mqstore.storage import ConfigError
from mqstore.storage.config_text import enum_value, optional_of, type_name


def field_types(section_class: type[Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(section_class)
    return {field.name: hints[field.name] for field in dataclasses.fields(section_class)}


def from_yaml(value: object, kind: Any, *, where: str) -> object:
    """Check a YAML value against the field type: no silent conversions (a quoted "8081"
    is a string, and a string is not a port)."""
    if (optional := optional_of(kind)) is not None:  # `X | None`: null, or an X
        if value is None:
            return None
        kind = optional
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return enum_value(kind, value, where=where)
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind in (bool, str) and isinstance(value, kind):
        return value
    if typing.get_origin(kind) is tuple and isinstance(value, list):
        if all(isinstance(item, int) and not isinstance(item, bool) for item in value):
            return tuple(value)
        raise ConfigError(f"{where}: {value!r} must be a list of integers")
    raise ConfigError(f"{where}: {value!r} is {_yaml_type(value)}; expected "
                      f"{type_name(kind)}")


def _yaml_type(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "a list", dict: "a mapping", type(None): "null"}
    return names.get(type(value), type(value).__name__)
