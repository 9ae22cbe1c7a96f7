"""Setting values from text: the one coercion for every setting that arrives as a string
(`MQSTORE_<SECTION>__<FIELD>` environment variables, Spark's `store.<field>` options and its
boolean options), by the field's declared type.

| type            | accepted text                                   |
|-----------------|-------------------------------------------------|
| int, float      | what `int()` / `float()` accept                 |
| bool            | true/false, 1/0, yes/no, on/off (any case)      |
| an enum         | a member's value (`sync`, `async`, ...)         |
| tuple[int, ...] | comma-separated integers (`4,5`)                |
| str             | the text as it is                               |
| optional X      | none, null or auto (any case): None; else as X  |

Anything else is a `ConfigError` (a `ValueError`) that names where the text came from.
"""

from __future__ import annotations

import enum
import typing
from typing import Any

from .errors import ConfigError

TRUE_TEXTS = frozenset({"true", "1", "yes", "on"})
FALSE_TEXTS = frozenset({"false", "0", "no", "off"})
NONE_TEXTS = frozenset({"none", "null", "auto"})
"""None for an optional setting: `auto` reads best for "decided from the store"
(`index_tags_enabled`)."""


def coerce_text(text: str, kind: Any, *, where: str) -> object:
    """`text` as a value of `kind`; `where` names the setting in the error."""
    if (optional := optional_of(kind)) is not None:
        if text.strip().lower() in NONE_TEXTS:
            return None
        kind = optional
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return enum_value(kind, text.strip(), where=where)
    if kind is bool:
        return parse_bool(text, where=where)
    try:
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
        if typing.get_origin(kind) is tuple:
            return tuple(int(item) for item in text.split(",") if item.strip())
    except ValueError:
        raise ConfigError(f"{where}: {text!r} is not {type_name(kind)}") from None
    if kind is str:
        return text
    raise ConfigError(f"{where}: a {type_name(kind)} setting cannot be given as text")


def parse_bool(text: str, *, where: str) -> bool:
    lowered = text.strip().lower()
    if lowered in TRUE_TEXTS:
        return True
    if lowered in FALSE_TEXTS:
        return False
    raise ConfigError(f"{where}: {text!r} is not a boolean (true/false, 1/0, yes/no, "
                      f"on/off)")


def enum_value(kind: type[enum.Enum], value: object, *, where: str) -> enum.Enum:
    for member in kind:
        if member.value == value:
            return member
    choices = ", ".join(str(member.value) for member in kind)
    raise ConfigError(f"{where}: {value!r} is not one of {choices}")


def optional_of(kind: Any) -> Any:
    """X for a type `X | None`, else None."""
    arguments = typing.get_args(kind)
    if len(arguments) == 2 and type(None) in arguments:
        return next(argument for argument in arguments if argument is not type(None))
    return None


def type_name(kind: Any) -> str:
    if (optional := optional_of(kind)) is not None:
        return f"{type_name(optional)} or none"
    if typing.get_origin(kind) is tuple:
        return "a list of integers"
    names = {int: "an integer", float: "a number", bool: "a boolean (true/false)",
             str: "a string"}
    return names.get(kind, str(kind))
