"""The HTTP schemas mirror the runtime records field for field (no silent drift)."""

from __future__ import annotations

import msgspec

from sa_core.server.schemas import MessageOut
from sa_core.spec import Message


def test_message_schema_has_every_message_field():
    http_fields = {f.name for f in msgspec.structs.fields(MessageOut)}
    # plus `output`: a structured answer's validated value, read out of metadata.output
    assert http_fields == set(Message.model_fields) | {"output"}
