"""Convert JSON Schema (as tools declare it) to the OpenAPI subset Gemini accepts."""

from __future__ import annotations

from typing import Any

_KEEP = frozenset(
    {
        "description",
        "enum",
        "required",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "pattern",
        "title",
        "propertyOrdering",
        "nullable",
    }
)
_STRING_FORMATS = frozenset({"enum", "date-time"})


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def _format_ok(kind: Any, value: Any) -> bool:
    return kind != "string" or value in _STRING_FORMATS


def gemini_schema(schema: Any) -> Any:
    """Convert a JSON Schema to Gemini's schema dialect.

    Types become upper case, ``["x", "null"]`` and ``anyOf`` with a null variant become
    ``nullable``, ``const`` becomes a one-value ``enum``, and keywords Gemini rejects
    (``additionalProperties``, ``$schema``, ``default``, unsupported string formats...) are
    dropped.
    """
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if isinstance(kind, list):
        if "null" in kind:
            out["nullable"] = True
        kind = next((k for k in kind if k != "null"), None)
    if isinstance(kind, str):
        out["type"] = kind.upper()
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: gemini_schema(sub) for name, sub in value.items()}
        elif key == "items":
            out[key] = gemini_schema(value)
        elif key in ("anyOf", "oneOf") and isinstance(value, list):
            variants = [v for v in value if not _is_null(v)]
            if len(variants) < len(value):
                out["nullable"] = True
            if len(variants) == 1:
                out.update(gemini_schema(variants[0]))
            elif variants:
                out["anyOf"] = [gemini_schema(v) for v in variants]
        elif key == "const":
            out["enum"] = [value]
        elif key in _KEEP or (key == "format" and _format_ok(kind, value)):
            out[key] = value
    return out


def function_parameters(schema: dict[str, Any]) -> dict[str, Any] | None:
    """Return a tool's parameters for Gemini, or ``None`` for a tool without arguments."""
    if schema.get("type", "object") == "object" and not schema.get("properties"):
        return None
    converted = gemini_schema(schema)
    return converted if isinstance(converted, dict) else None
