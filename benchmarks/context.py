"""Context cost of a long thread: prompt tokens per turn and the share served from cache.

Run: ``python benchmarks/context.py [--turns N]``. One chat thread of 600 turns (each turn a
~300-character message and a ~300-character answer), answered by a fake model that reports
usage like a caching provider: ``prompt_tokens`` is the request's estimated size and
``cached_tokens`` the length of the common prefix with the thread's previous request, both in
tokens estimated the way compaction estimates them
(:func:`sa_core.engine.model.compaction.estimate_request_tokens`: four characters a token). The
summarizer's calls are requests of the thread too, billed and counted like any other.

Printed, without compaction (today's growth) and with
``compaction={"trigger_tokens": 6000, "keep_last": 60}``:

- the prompt tokens of the turn's request at turn 50 and at the last turn, and their ratio
  (target with compaction: at most 1.5);
- input tokens per turn, summarizer calls included, averaged over the ten turns up to each;
- the share of input tokens served from cache from turn 3 on (target: at least 70 %).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
from sa_core.engine.model.compaction import CHARS_PER_TOKEN, estimate_request_tokens
from sa_core.engine.model.compaction_summary import SUMMARY_INSTRUCTIONS
from sa_core.providers import ProviderMessage, ProviderRequest, ProviderResponse, Usage
from sa_core.testing import FunctionProvider

COMPACTION = {"trigger_tokens": 6000, "keep_last": 60}
WORDS = "the quick brown fox jumps over the lazy dog and keeps running through the field "
TEXT = (WORDS * 4)[:290]


def _pieces(request: ProviderRequest) -> list[str]:
    """The request as the strings a prefix cache compares, in wire order."""
    tools = [f"{t.name}\0{t.description}\0{t.parameters}" for t in request.tools]
    return tools + [_text(m) for m in request.messages]


def _text(message: ProviderMessage) -> str:
    calls = "".join(f"{c.name}{c.arguments}" for c in message.tool_calls)
    return f"{message.content or ''}{message.reasoning or ''}{calls}"


def _common_chars(old: list[str], new: list[str]) -> int:
    chars = 0
    for a, b in zip(old, new, strict=False):
        if a == b:
            chars += len(b)
            continue
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            chars += 1
        break
    return chars


class CachingModel:
    """A fake model that reports usage like a caching provider, and records it per call."""

    def __init__(self) -> None:
        self.previous: dict[str | None, list[str]] = {}
        self.calls: list[dict[str, Any]] = []
        self.turn = 0

    def __call__(self, request: ProviderRequest) -> ProviderResponse:
        pieces = _pieces(request)
        prompt = estimate_request_tokens(request.messages, request.tools)
        cached = _common_chars(self.previous.get(request.user, []), pieces) // CHARS_PER_TOKEN
        self.previous[request.user] = pieces
        summary = request.messages[0].content == SUMMARY_INSTRUCTIONS
        self.calls.append(
            {"turn": self.turn, "summary": summary, "prompt": prompt, "cached": min(cached, prompt)}
        )
        content = f"Summary of turns up to {self.turn}: " + TEXT[:200] if summary else TEXT
        usage = Usage(prompt_tokens=prompt, completion_tokens=75, total_tokens=prompt + 75)
        usage.cached_tokens = min(cached, prompt)
        return ProviderResponse(content=content, usage=usage)


async def run(turns: int, compaction: dict[str, int] | None) -> CachingModel:
    """One thread of ``turns`` turns; returns the model with its recorded calls."""
    model = CachingModel()
    prompt = define_prompt(
        name="chat",
        model="fast",
        prompt="You are a helpful assistant. " * 20,
        include_chat=True,
        compaction=compaction,
    )
    pack = Pack(
        name="bench",
        agents=[define_agent(name="chatter", side_a={"prompt": "chat"})],
        prompts=[prompt],
        models=[define_model(name="fast", provider="test", model="bench")],
    )
    provider = FunctionProvider(model, max_recorded=1)
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{Path(directory) / 'context.db'}"
        async with Runtime(
            packs=[pack], providers={"test": provider}, database_url=url, load_entrypoints=False
        ) as runtime:
            thread = await runtime.create_thread("chatter")
            for turn in range(1, turns + 1):
                model.turn = turn
                await thread.send_message(f"Turn {turn}: {TEXT}")
    return model


def report(label: str, model: CachingModel, turns: int) -> float:
    """Print one variant's figures; returns the ratio of the last turn's request to turn 50's."""
    main = {c["turn"]: c["prompt"] for c in model.calls if not c["summary"]}
    at_50, at_last = main[50], main[turns]

    def per_turn(last: int) -> float:
        window = [c["prompt"] for c in model.calls if last - 10 < c["turn"] <= last]
        return sum(window) / 10

    later = [c for c in model.calls if c["turn"] >= 3]
    share = sum(c["cached"] for c in later) / max(1, sum(c["prompt"] for c in later))
    summaries = sum(1 for c in model.calls if c["summary"])
    ratio = at_last / at_50
    print(f"{label}:")
    print(f"  prompt tokens of the turn's request: turn 50 {at_50}, turn {turns} {at_last}")
    print(f"  ratio turn {turns} / turn 50: {ratio:.2f}")
    print(
        f"  input tokens per turn (summaries included, mean of 10 turns): "
        f"turn 50 {per_turn(50):.0f}, turn {turns} {per_turn(turns):.0f}"
    )
    print(f"  served from cache from turn 3 on: {share:.1%} ({summaries} summarizer calls)")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=600)
    turns = parser.parse_args().turns
    for label, compaction in (("without compaction", None), ("with compaction", COMPACTION)):
        started = time.perf_counter()
        model = asyncio.run(run(turns, compaction))
        report(f"{label} ({time.perf_counter() - started:.1f} s)", model, turns)


if __name__ == "__main__":
    main()
