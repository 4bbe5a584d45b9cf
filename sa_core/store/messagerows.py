"""How a :class:`~sa_core.spec.records.Message` becomes a ``messages`` row and back.

The hot path of every history read and message write: prebuilt parameter lists, and a read
row with no extras becomes a message without validating it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import isfinite
from operator import attrgetter, itemgetter
from typing import Any

from sa_core.spec.records import Message
from sa_core.store import tables as t

MESSAGE_FIELDS = frozenset(Message.model_fields)
JSON_FIELDS = frozenset({"tool_calls", "attachments", "metadata", "reasoning_details"})
COLUMN_OF = {"metadata": "meta"}
_FIELD = {column: field for field, column in COLUMN_OF.items()}
MESSAGE_COLUMNS = [
    column.label(_FIELD[column.name]) if column.name in _FIELD else column
    for column in t.messages.c
    if column.name != "seq"
]
"""The columns a message is read from, each named as its field (``meta`` as ``metadata``).

Read rows are dicts in the order of the message's fields, then ``extra``."""
_ROW_COLUMNS = [c.name for c in t.messages.c if c.name != "seq"]
"""The table's column names (the insert parameters are ``p_<column>``)."""
_READ_KEYS = tuple(column.key for column in MESSAGE_COLUMNS)
STORED_FIELDS = {
    key: COLUMN_OF.get(key, key)
    for key in Message.model_fields
    if COLUMN_OF.get(key, key) in t.messages.c and key not in ("seq", "extra")
}
"""Message field -> column; any other field (or extra) is kept in the ``extra`` JSON column."""

_PARAMS = [(key, f"p_{column}") for key, column in STORED_FIELDS.items()]
"""(Message field, insert parameter) of every stored field."""
_PLAIN_PARAMS = [(key, param) for key, param in _PARAMS if key not in JSON_FIELDS]
"""The stored fields whose values are stored as they are (strings, numbers, booleans)."""
_JSON_PARAMS = [(key, param) for key, param in _PARAMS if key in JSON_FIELDS]
"""The stored fields kept as JSON documents (models and lists of them are dumped first)."""
_PLAIN_NAMES = tuple(param for _, param in _PLAIN_PARAMS)
_PLAIN_VALUES = itemgetter(*(key for key, _ in _PLAIN_PARAMS))
_SERIALIZER = Message.__pydantic_serializer__


def message_to_row(message: Message) -> dict[str, Any]:
    """Convert a message to ``messages`` insert parameters (extras go to ``extra``).

    The same parameters as ``message.model_dump(mode="json")`` gives, dumping only the fields
    that need it: the scalar fields are taken as they are, and the JSON fields that are set
    (usually none, or only ``tool_calls``) go through the model's serializer.
    """
    if message.__pydantic_extra__:  # model_extra without the property call
        return _row_with_extras(message)
    values = message.__dict__
    params = dict(zip(_PLAIN_NAMES, _PLAIN_VALUES(values), strict=True))
    present = {key for key, _ in _JSON_PARAMS if values[key] is not None}
    if present:
        dumped = _SERIALIZER.to_python(message, mode="json", include=present)
        for key, param in _JSON_PARAMS:
            params[param] = dumped.get(key)
    else:
        for _, param in _JSON_PARAMS:
            params[param] = None
    params["p_extra"] = None
    return params


def _row_with_extras(message: Message) -> dict[str, Any]:
    """:func:`message_to_row` of a message with extra fields (kept in the ``extra`` column)."""
    dumped = message.model_dump(mode="json")
    params = {param: dumped[key] for key, param in _PARAMS}
    params["p_extra"] = {
        key: value for key, value in dumped.items() if key not in STORED_FIELDS
    } or None
    return params


def message_from_row(row: dict[str, Any]) -> Message:
    """Build a :class:`Message` from a row read with :data:`MESSAGE_COLUMNS` (consumed)."""
    extra = row.pop("extra")
    if extra:
        for key, value in extra.items():
            row.setdefault(key, value)
    elif row["tool_calls"] is None and row["attachments"] is None and IN_FIELD_ORDER:
        return _stored_message(row)
    return Message.model_validate(row)


IN_FIELD_ORDER = (*Message.model_fields, "extra") == _READ_KEYS
"""Whether the table's columns are the message's fields in order, then ``extra`` (a read row
without ``extra`` is then a message's ``__dict__``)."""
_new, _set = object.__new__, object.__setattr__


def _stored_message(fields: dict[str, Any]) -> Message:
    """The :class:`Message` of a read row with no extras and no nested model to build.

    Equal to what ``Message.model_validate`` returns for it, field for field and type for type
    (the columns' result processors give the Python types: ``bool``, ``int``, decoded JSON), in
    the same order, without checking again what was checked when the message was written. A
    history read builds most of its messages this way, at about a third of the cost; pydantic's
    ``model_construct`` does the same in Python, slower than validating a model of 31 fields.
    """
    message = _new(Message)
    _set(message, "__dict__", fields)
    _set(message, "__pydantic_fields_set__", set(MESSAGE_FIELDS))
    _set(message, "__pydantic_extra__", {})
    _set(message, "__pydantic_private__", None)
    return message


def history_rows(
    thread_id: str, messages: Sequence[Message], rows: list[dict[str, Any]]
) -> list[Message]:
    """The messages :meth:`MessagesMixin.history` would load from these inserted rows.

    In stored order (creation time, then insertion). A message whose free-form values are
    plain JSON already reads back equal to itself and is kept as it is (no copy, no
    validation); any other is rebuilt from its row the way a reload builds it.
    """
    found = []
    for message, row in zip(messages, rows, strict=True):
        if message.thread_id != thread_id or message.depth != 0 or message.status == "pending":
            continue
        metadata, details = message.metadata, message.reasoning_details
        extra = message.__pydantic_extra__  # model_extra without the property call
        if (
            (metadata is None or _plain_json(metadata))
            and (details is None or _plain_json(details))
            and (not extra or _plain_json(extra))
        ):
            found.append(message)
        else:
            values = (row[f"p_{column}"] for column in _ROW_COLUMNS)
            found.append(message_from_row(dict(zip(_READ_KEYS, values, strict=True))))
    if len(found) > 1:
        found.sort(key=_CREATED_AT)
    return found


_CREATED_AT = attrgetter("created_at")


def _plain_json(value: Any) -> bool:
    """Whether a value reads back from JSON as itself (str keys, JSON scalars, lists).

    A float that is not finite is not: the model's JSON dump stores it as ``null``.
    """
    if value is None or isinstance(value, (str, int)):
        return True
    if isinstance(value, float):
        return isfinite(value)
    if isinstance(value, list):
        return all(_plain_json(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain_json(item) for key, item in value.items())
    return False


def messages_from_rows(rows: list[dict[str, Any]]) -> list[Message]:
    """:func:`message_from_row` of each row (consumed)."""
    return [message_from_row(row) for row in rows]
