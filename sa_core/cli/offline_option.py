"""The ``--test-provider[=SCRIPT]`` option ``sa run`` and ``sa serve`` share."""

from __future__ import annotations

from typing import Any


def add_test_provider_option(parser: Any) -> None:
    """Add ``--test-provider[=SCRIPT]``: ``True`` alone, the script path when given."""
    parser.add_argument(
        "--test-provider",
        nargs="?",
        const=True,
        default=False,
        metavar="SCRIPT",
        help="answer every model offline (no API keys needed): 'Test response received.', or "
        "the answers of a YAML/JSON script with --test-provider=SCRIPT; offline, a message "
        "'/tool NAME {json}' makes the model call that tool",
    )


def describe_offline(option: bool | str) -> str:
    """One sentence saying how models are answered, for start-up banners."""
    how = "'Test response received.'" if option is True else f"the answers of {option}"
    return (
        f"Every model is answered by the offline test provider (--test-provider): {how}; "
        "a message '/tool NAME {json}' makes it call that tool."
    )
