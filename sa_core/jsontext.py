"""JSON text as ``json.dumps`` writes it, without building an encoder for every value.

``json.dumps(value)`` makes a new C encoder on each call, which costs more than encoding the
small values a step writes (the log row, the resume point, tool-call arguments). These
functions keep one encoder each and give byte-for-byte the same text as the ``json.dumps``
call they name. Circular structures raise ``RecursionError`` instead of ``ValueError``.
"""

from __future__ import annotations

import json.encoder
from collections.abc import Callable
from typing import Any

_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)  # CPython's C accelerator


def _unserializable(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _encoder(
    *, compact: bool, sort_keys: bool = False, default: Callable[[Any], Any] = _unserializable
) -> Callable[[Any], str] | None:
    if _c_make_encoder is None:
        return None
    from json.encoder import encode_basestring, encode_basestring_ascii

    encode = _c_make_encoder(
        None,  # no circular-reference markers: a cycle ends in RecursionError
        default,
        encode_basestring if compact else encode_basestring_ascii,
        None,  # indent
        ":" if compact else ": ",
        "," if compact else ", ",
        sort_keys,
        False,  # skipkeys
        True,  # allow_nan
    )

    def dumps(value: Any) -> str:
        return "".join(encode(value, 0))

    return dumps


def _fallback_default(value: Any) -> str:
    return json.dumps(value)


def _fallback_compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _fallback_canonical(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True, default=str)


dumps: Callable[[Any], str] = _encoder(compact=False) or _fallback_default
"""``json.dumps(value)``: the text of the store's JSON columns."""

dumps_compact: Callable[[Any], str] = _encoder(compact=True) or _fallback_compact
"""``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``."""

dumps_canonical: Callable[[Any], str] = (
    _encoder(compact=True, sort_keys=True, default=str) or _fallback_canonical
)
"""``json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True,
default=str)``: one text per value whatever the order of its keys (what a hash is made of)."""
