"""The JSON Schema of the suite format, generated from :class:`~sa_core.evals.suite.Suite`.

The package ships it as ``sa_core/evals/suite.schema.json`` (editors and CI validate suite
files with it); ``python -m sa_core.evals.schema`` rewrites that file from the model, and a test
keeps the two equal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sa_core.evals.suite import Suite

SCHEMA_FILE = Path(__file__).with_name("suite.schema.json")
SCHEMA_ID = "https://standard-agents.dev/schemas/eval-suite.schema.json"


FILE_REFERENCE = {"type": "string", "pattern": "^@\\S+$", "description": "@path/to/file.json"}
"""A value read from a file relative to the suite (``"@schemas/refund.json"``)."""


def suite_schema() -> dict[str, Any]:
    """The suite format's JSON Schema (draft 2020-12), from the pydantic model.

    Every free-form JSON object (a schema, a ``json_contains`` value) may also be an ``@file``
    reference, as :meth:`Suite.load` resolves them before validating.
    """
    schema = _with_file_references(Suite.model_json_schema())
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


def _with_file_references(node: Any) -> Any:
    if isinstance(node, list):
        return [_with_file_references(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _with_file_references(value) for key, value in node.items()}
    if node.get("type") == "object" and "properties" not in node and "$ref" not in node:
        return {"anyOf": [node, FILE_REFERENCE]}
    return node


def shipped_schema() -> dict[str, Any]:
    """The schema file the package ships."""
    data: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return data


def write_schema(path: Path = SCHEMA_FILE) -> Path:
    """Write the schema (sorted keys, two-space indent) to ``path``."""
    path.write_text(json.dumps(suite_schema(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    print(write_schema())
