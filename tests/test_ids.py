"""Identifiers the engine gives messages, logs and queue entries."""

from __future__ import annotations

import time
import uuid

from sa_core.engine.messages import new_id


def test_ids_are_version_7_uuids_in_canonical_form() -> None:
    ids = {new_id() for _ in range(2000)}
    assert len(ids) == 2000
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122


def test_ids_made_later_sort_after_earlier_ones() -> None:
    first = new_id()
    time.sleep(0.002)
    second = new_id()
    assert first < second
    stamp = int(uuid.UUID(second).hex[:12], 16)
    assert abs(stamp - time.time_ns() // 1_000_000) < 1000  # its time, in milliseconds
