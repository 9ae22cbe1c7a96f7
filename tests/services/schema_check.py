"""A small JSON Schema checker for the OpenAPI tests: the keywords our documents use.

Supports $ref (local), type (one or a list), enum, required, properties,
additionalProperties (bool or schema), propertyNames, items, minItems, maxItems, minimum,
maximum, minLength, maxLength, pattern, oneOf, not.  An unknown keyword fails loudly, so a
document can never use one this checker silently ignores.
"""

from __future__ import annotations

import re
from typing import Any

KNOWN = {"$ref", "type", "enum", "required", "properties", "additionalProperties", "items",
         "minItems", "maxItems", "minimum", "maximum", "minLength", "maxLength", "description",
         "format", "pattern", "oneOf", "not", "propertyNames", "default"}
TYPES: dict[str, Any] = {"object": dict, "array": list, "string": str, "boolean": bool,
                         "null": type(None), "number": (int, float), "integer": int}


def check(instance: object, schema: dict[str, Any], *, root: dict[str, Any],
          where: str = "$") -> None:
    """Raise AssertionError naming the first place `instance` breaks `schema`."""
    unknown = schema.keys() - KNOWN
    assert not unknown, f"{where}: schema keywords {unknown} are not supported here"
    if "$ref" in schema:
        check(instance, _resolve(schema["$ref"], root), root=root, where=where)
        return
    if "oneOf" in schema:
        matched = [index for index, option in enumerate(schema["oneOf"])
                   if _matches(instance, option, root=root)]
        assert len(matched) == 1, f"{where}: matches options {matched} of oneOf, not one"
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        assert any(_is(instance, name) for name in names), \
            f"{where}: {instance!r} is not {names}"
    if "enum" in schema:
        assert instance in schema["enum"], f"{where}: {instance!r} not in {schema['enum']}"
    if "not" in schema:
        assert not _matches(instance, schema["not"], root=root), f"{where}: matches `not`"
    if isinstance(instance, int | float) and not isinstance(instance, bool):
        assert instance >= schema.get("minimum", instance), f"{where}: {instance} < minimum"
        assert instance <= schema.get("maximum", instance), f"{where}: {instance} > maximum"
    if isinstance(instance, str):
        assert len(instance) >= schema.get("minLength", 0), f"{where}: too short"
        assert len(instance) <= schema.get("maxLength", len(instance)), f"{where}: too long"
        assert "pattern" not in schema or re.search(schema["pattern"], instance), \
            f"{where}: {instance!r:.80} does not match {schema['pattern']!r:.80}"
    if isinstance(instance, dict):
        _check_object(instance, schema, root=root, where=where)
    if isinstance(instance, list):
        assert len(instance) >= schema.get("minItems", 0), f"{where}: too few items"
        assert len(instance) <= schema.get("maxItems", len(instance)), f"{where}: too many"
        for index, item in enumerate(instance):
            if "items" in schema:
                check(item, schema["items"], root=root, where=f"{where}[{index}]")


def _check_object(instance: dict[str, Any], schema: dict[str, Any], *, root: dict[str, Any],
                  where: str) -> None:
    for name in schema.get("required", []):
        assert name in instance, f"{where}: required {name!r} missing"
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for name, value in instance.items():
        if "propertyNames" in schema:
            check(name, schema["propertyNames"], root=root, where=f"{where} key {name!r}")
        if name in properties:
            check(value, properties[name], root=root, where=f"{where}.{name}")
        elif extra is False:
            raise AssertionError(f"{where}: {name!r} is not documented")
        elif isinstance(extra, dict):
            check(value, extra, root=root, where=f"{where}.{name}")


def _matches(instance: object, schema: dict[str, Any], *, root: dict[str, Any]) -> bool:
    try:
        check(instance, schema, root=root)
    except AssertionError:
        return False
    return True


def _is(instance: object, name: str) -> bool:
    if name in ("integer", "number") and isinstance(instance, bool):
        return False
    if name == "integer" and isinstance(instance, float):
        return instance.is_integer()  # JSON Schema: a number with a zero fraction
    return isinstance(instance, TYPES[name])


def _resolve(reference: str, root: dict[str, Any]) -> dict[str, Any]:
    assert reference.startswith("#/"), reference
    node: Any = root
    for part in reference[2:].split("/"):
        node = node[part]
    assert isinstance(node, dict)
    return node
