"""Argument schemas: pydantic model classes or JSON Schema dicts, validated the same way."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

ArgsSpec = type[BaseModel] | dict[str, Any] | None

EMPTY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def is_model_class(value: object) -> bool:
    """Whether ``value`` is a pydantic model class."""
    return isinstance(value, type) and issubclass(value, BaseModel)


def json_schema_of(args: ArgsSpec) -> dict[str, Any]:
    """The JSON Schema object offered to a model for these arguments."""
    if args is None:
        return dict(EMPTY_OBJECT_SCHEMA)
    if isinstance(args, dict):
        return args
    schema = args.model_json_schema()
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def validate_args(args: ArgsSpec, data: dict[str, Any]) -> tuple[Any, list[str]]:
    """Validate tool-call arguments.

    Returns:
        ``(value, problems)``: the validated value (a model instance for model classes, the dict
        otherwise) and a list of ``"path: message"`` problems, empty on success.
    """
    if args is None:
        return data, []
    if isinstance(args, dict):
        return data, _check_json_schema(args, data, "")
    try:
        return args.model_validate(data), []
    except PydanticValidationError as exc:
        problems = []
        for error in exc.errors():
            path = ".".join(str(p) for p in error["loc"]) or "(root)"
            problems.append(f"{path}: {error['msg']}")
        return None, problems


def _check_json_schema(schema: dict[str, Any], value: Any, path: str) -> list[str]:
    """A small JSON Schema check: types, required properties, enums, nested objects/arrays."""
    problems: list[str] = []
    label = path or "(root)"
    expected = schema.get("type")
    if isinstance(expected, str) and expected in _JSON_TYPES:
        ok = isinstance(value, _JSON_TYPES[expected])
        if expected in ("integer", "number") and isinstance(value, bool):
            ok = False
        if not ok:
            return [f"{label}: expected {expected}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{label}: must be one of {schema['enum']}")
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                problems.append(f"{path + '.' if path else ''}{name}: Field required")
        for name, sub in schema.get("properties", {}).items():
            if name in value and isinstance(sub, dict):
                problems += _check_json_schema(
                    sub, value[name], f"{path + '.' if path else ''}{name}"
                )
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            problems += _check_json_schema(schema["items"], item, f"{label}.{index}")
    return problems


def dump_args(args: ArgsSpec) -> dict[str, Any] | None:
    """Serialise an argument spec for JSON output (model classes become JSON Schema)."""
    return None if args is None else json_schema_of(args)


def check_schema(schema: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming the problem when ``schema`` is not a valid JSON Schema."""
    from jsonschema import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = ".".join(str(p) for p in exc.absolute_path) or "(root)"
        raise ValueError(f"not a valid JSON Schema: {where}: {exc.message}") from None


def validate_output(schema: ArgsSpec, data: Any) -> tuple[Any, list[str]]:
    """Validate a structured answer: by the model class, or by the JSON Schema.

    JSON Schema dicts get the full check of the ``jsonschema`` package (the draft the schema
    names, 2020-12 by default: ``$ref``, ``anyOf``, ``minimum``, ``pattern``,
    ``additionalProperties``, ...), not the small check tool arguments get.

    Returns:
        ``(value, problems)``; each problem is ``"field.path: message"``.
    """
    if not isinstance(schema, dict):
        return validate_args(schema, data)
    from jsonschema.validators import validator_for

    validator = validator_for(schema)(schema)
    problems = []
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.path))):
        path = [str(p) for p in error.absolute_path]
        message = error.message
        required, instance = error.validator_value, error.instance
        if error.validator == "required" and isinstance(required, list):
            # name the missing field in the path, as pydantic does ("age: Field required")
            missing = [n for n in required if isinstance(instance, dict) and n not in instance]
            name = next((n for n in missing if message.startswith(repr(n))), None)
            if name is not None:
                path, message = [*path, name], "Field required"
        problems.append(f"{'.'.join(path) or '(root)'}: {message}")
    return data, problems
