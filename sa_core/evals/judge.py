"""Judge rubrics: a judge model answers each rubric yes or no, ``samples`` times.

The judge is a model definition of the target's pack (``models={"judge": "<model>"}``, else the
suite's ``judge_model``, else the pack's first chat model). Each sample sees the rubric and the
trial's transcript and answers JSON ``{"verdict": "yes" | "no", "reasoning": "..."}``; the
majority decides, and every sample's verdict and reasoning are kept in the score's details.
Judge calls go through the run's cache like the agent's, each sample under its own key.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sa_core.evals.scorers import Score
from sa_core.providers import ProviderMessage, ProviderRequest

if TYPE_CHECKING:
    from sa_core.evals.suite import JudgeRubric
    from sa_core.evals.view import TrialView
    from sa_core.providers import Provider
    from sa_core.spec.models import ModelDefinition

JUDGE_SYSTEM = """\
You are a strict evaluator of an AI agent's conversation. You are given a rubric and the
transcript. Decide whether the transcript satisfies the rubric. Answer only with JSON:
{"verdict": "yes" or "no", "reasoning": "one or two sentences"}."""

_VERDICT = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Judge:
    """A judge model: its definition and the provider that answers it."""

    model: ModelDefinition
    provider: Provider

    async def sample(self, rubric: str, transcript: str, key: str) -> tuple[bool | None, str]:
        """One verdict (``None`` when the answer had none) and its reasoning."""
        request = ProviderRequest(
            model=self.model.model,
            messages=[
                ProviderMessage(role="system", content=JUDGE_SYSTEM),
                ProviderMessage(
                    role="user", content=f"Rubric: {rubric}\n\nTranscript:\n{transcript}"
                ),
            ],
            provider_options=dict(self.model.provider_options or {}),
            user=key,
        )
        response = await self.provider.generate(request)
        return parse_verdict(response.content or "")

    async def score(self, rubric: JudgeRubric, view: TrialView, key: str) -> Score:
        """The majority verdict of ``rubric.samples`` samples, with each sample's reasoning."""
        transcript = view.transcript()
        samples: list[dict[str, Any]] = []
        for index in range(rubric.samples):
            verdict, reasoning = await self.sample(rubric.rubric, transcript, f"{key}#{index}")
            samples.append({"verdict": verdict, "reasoning": reasoning})
        yes = sum(1 for s in samples if s["verdict"] is True)
        passed = yes * 2 > rubric.samples
        first = next((s["reasoning"] for s in samples if (s["verdict"] is True) == passed), "")
        return Score(
            passed=passed,
            score=yes / rubric.samples,
            reason=f"{yes}/{rubric.samples} judge samples said yes: {first}".strip(),
            details={"rubric": rubric.rubric, "model": self.model.name, "samples": samples},
        )


def parse_verdict(text: str) -> tuple[bool | None, str]:
    """``(verdict, reasoning)`` from a judge's answer: JSON, else the first yes/no word."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match:
        try:
            data = json.loads(match.group(0))
        except ValueError:
            data = None
        if isinstance(data, dict) and "verdict" in data:
            verdict = str(data["verdict"]).strip().lower()
            answer = True if verdict == "yes" else False if verdict == "no" else None
            return answer, str(data.get("reasoning", ""))
    word = _VERDICT.search(text)
    if word is None:
        return None, text.strip()
    return word.group(1).lower() == "yes", text.strip()
