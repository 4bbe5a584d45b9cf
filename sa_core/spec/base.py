"""Base classes shared by every spec model."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class SpecModel(BaseModel):
    """A definition with snake_case attributes that also reads and writes the spec's camelCase.

    ``Model.model_validate({"sideA": ...})`` and ``Model(side_a=...)`` both work;
    ``model_dump(by_alias=True)`` writes camelCase JSON that round-trips with the TypeScript
    ecosystem. Unknown fields are rejected so typos surface as errors.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        arbitrary_types_allowed=True,
        validate_default=False,
    )


def env_from_tenvs(data: Any) -> Any:
    """Accept the spec's deprecated ``tenvs`` as ``env`` (a ``mode="before"`` validator)."""
    if isinstance(data, dict) and "tenvs" in data:
        data = dict(data)
        data.setdefault("env", data.pop("tenvs"))
    return data


DEFERRED = ConfigDict(defer_build=True)
"""The ``model_config`` of a model that neither defining a pack nor answering a message needs:
pydantic builds its validator when it is first used, not when its module is imported (half a
millisecond to a millisecond of start-up each). Only for models no such model nests: a nested
model's schema is built with its parent anyway."""


class RecordModel(BaseModel):
    """A runtime record whose spec field names are already snake_case (messages, results)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
