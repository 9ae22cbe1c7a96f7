"""Setting values checked against their dataclass field types: YAML values exactly (no silent
conversions), environment variable text coerced (see config_file.py)."""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Any

from mqstore.storage import ConfigError

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def field_types(section_class: type[Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(section_class)
    return {field.name: hints[field.name] for field in dataclasses.fields(section_class)}


def from_yaml(value: object, kind: Any, *, where: str) -> object:
    """Check a YAML value against the field type: no silent conversions (a quoted "8081"
    is a string, and a string is not a port)."""
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return _enum_value(kind, value, where=where)
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
                      f"{_type_name(kind)}")


def from_text(text: str, kind: Any, *, where: str) -> object:
    """Coerce an environment variable's text by the field type."""
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return _enum_value(kind, text, where=where)
    try:
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
        if typing.get_origin(kind) is tuple:
            return tuple(int(item) for item in text.split(",") if item.strip())
    except ValueError:
        raise ConfigError(f"{where}: {text!r} is not {_type_name(kind)}") from None
    if kind is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConfigError(f"{where}: {text!r} is not a boolean (true/false/1/0/yes/no)")
    assert kind is str, f"no coercion for {kind}"
    return text


def _enum_value(kind: type[enum.Enum], value: object, *, where: str) -> enum.Enum:
    for member in kind:
        if member.value == value:
            return member
    choices = ", ".join(str(member.value) for member in kind)
    raise ConfigError(f"{where}: {value!r} is not one of {choices}")


def _type_name(kind: Any) -> str:
    if typing.get_origin(kind) is tuple:
        return "a list of integers"
    names = {int: "an integer", float: "a number", bool: "a boolean (true/false)",
             str: "a string"}
    return names.get(kind, str(kind))


def _yaml_type(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "a list", dict: "a mapping", type(None): "null"}
    return names.get(type(value), type(value).__name__)
