"""Schedule definitions: a bad cron expression, interval or time zone is one clear error."""

from __future__ import annotations

import pytest
from echo_agent import echo_pack

from sa_core import ScheduleDefinitionError, define_schedule
from sa_core.errors import PackValidationError


def test_a_bad_cron_expression_time_zone_and_thread_are_one_error_naming_the_schedule() -> None:
    with pytest.raises(ScheduleDefinitionError) as caught:
        define_schedule(
            name="digest",
            agent="helper",
            cron="61 8 * * 1-5",
            timezone="Mars/Olympus",
            thread="sometimes",  # type: ignore[arg-type]
            message="go",
        )
    error = caught.value
    assert error.schedule == "digest"
    assert len(error.problems) == 3
    assert str(error).startswith("Schedule 'digest' has 3 problem(s):")
    assert "cron '61 8 * * 1-5' is not a valid cron expression (Bad minute)" in str(error)
    assert "timezone 'Mars/Olympus' is not a known IANA time zone" in str(error)
    assert "thread 'sometimes'" in str(error)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"every": "15"}, "every '15' is not an interval: write a number and a unit: s, m, h"),
        ({"every": "0s"}, "every '0s' is not an interval: the interval must be longer than 0"),
        ({"every": "5m", "cron": "* * * * *"}, "give exactly one of cron"),
        ({}, "give exactly one of cron (e.g. cron='0 8 * * 1-5') or every (e.g. every='15m'), not"),
    ],
)
def test_a_bad_every_value_or_both_or_neither_is_a_clear_error(
    fields: dict[str, str], expected: str
) -> None:
    with pytest.raises(ScheduleDefinitionError, match="Schedule 'poll'") as caught:
        define_schedule(name="poll", agent="helper", message="go", **fields)  # type: ignore[arg-type]
    assert expected in str(caught.value)


def test_every_takes_seconds_minutes_hours_and_days() -> None:
    seconds = {
        every: define_schedule(name="s", agent="a", message="m", every=every).every_seconds
        for every in ("30s", "15m", "2h", "1d", "1h30m")
    }
    assert seconds == {"30s": 30, "15m": 900, "2h": 7200, "1d": 86400, "1h30m": 5400}


def test_a_pack_schedule_of_an_unknown_agent_or_a_duplicate_name_fails_validation() -> None:
    pack = echo_pack()
    pack.schedules = [
        define_schedule(name="a", agent="helpr", every="1m", message="a"),
        define_schedule(name="a", agent="helper", every="1m", message="a"),
    ]
    with pytest.raises(PackValidationError) as caught:
        pack.validate()
    text = str(caught.value)
    assert (
        "schedule 'a': agent 'helpr' is not an agent of the pack (did you mean 'helper'?)" in text
    )
    assert "schedule 'a' is defined 2 times in schedules" in text
