"""Deterministic embeddings for tests and offline runs: similar spellings, similar vectors.

:func:`text_vector` hashes the character trigrams of a text's lower-cased words into
:data:`DIMENSIONS` buckets and normalises the counts to length 1. Texts sharing words or parts
of words (``tea`` and ``teas``) point the same way; unrelated texts are nearly orthogonal. No
model, no network, the same vector on every machine.
"""

from __future__ import annotations

import math
import re
import zlib

from sa_core.embeddings import EmbeddingRequest, EmbeddingResponse
from sa_core.providers import Usage

DIMENSIONS = 256
"""The length of the test provider's vectors."""
_WORD = re.compile(r"\w+", re.UNICODE)


def text_vector(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """The deterministic vector of ``text`` (all zeros but the first for a text without words)."""
    counts = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        padded = f" {word} "
        for start in range(len(padded) - 2):
            bucket = zlib.crc32(padded[start : start + 3].encode()) % dimensions
            counts[bucket] += 1.0
    norm = math.sqrt(sum(count * count for count in counts))
    if norm == 0:
        return [1.0] + [0.0] * (dimensions - 1)
    return [count / norm for count in counts]


def embedding_response(request: EmbeddingRequest) -> EmbeddingResponse:
    """The test provider's answer: :func:`text_vector` of each input, a token per word."""
    tokens = sum(len(_WORD.findall(text)) for text in request.inputs)
    return EmbeddingResponse(
        vectors=[text_vector(text) for text in request.inputs],
        usage=Usage(prompt_tokens=tokens, total_tokens=tokens),
    )


__all__ = ["DIMENSIONS", "embedding_response", "text_vector"]
