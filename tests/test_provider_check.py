"""Unknown providers and missing keys are named before a turn runs (sa_core.provider_check)."""

from __future__ import annotations

import pytest

from sa_core import Pack, define_agent, define_model, define_prompt
from sa_core.errors import DefinitionNotFoundError
from sa_core.provider_check import describe_missing, model_keys, unknown_provider_problems
from sa_core.testing import TestProvider


class Keyed:
    name = "openai"
    key_variable = "OPENAI_API_KEY"


class Keyless:
    name = "local"
    key_variable = "LOCAL_KEY"
    key_required = False


def pack_with(*models: tuple[str, str]) -> Pack:
    return Pack(
        name="p",
        agents=[define_agent(name="a", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model=models[0][0], prompt="x")],
        models=[define_model(name=n, provider=prov, model=f"{n}-1") for n, prov in models],
    )


def test_unknown_provider_problem_suggests_the_close_name() -> None:
    problems = unknown_provider_problems(pack_with(("fast", "opnai")), ["openai", "anthropic"])
    assert problems == [
        "model 'fast': provider 'opnai' is not installed. Did you mean 'openai'? Fix the "
        "model's provider, or install the plugin that registers provider 'opnai' (pass "
        "providers={...} to Runtime in code). Installed providers: anthropic, openai."
    ]
    assert unknown_provider_problems(pack_with(("fast", "openai")), ["openai"]) == []


@pytest.mark.asyncio
async def test_runtime_names_an_unknown_provider_readably(sa_runtime_factory) -> None:
    async with sa_runtime_factory(packs=[pack_with(("fast", "test"))]) as runtime:
        with pytest.raises(DefinitionNotFoundError) as caught:
            runtime.kernel.models.provider("tset")
    message = str(caught.value)
    assert message == (
        "Unknown provider 'tset'. Did you mean 'test'? Fix the model's provider, or install "
        "the plugin that registers provider 'tset' (pass providers={...} to Runtime in code). "
        "Known providers: test."
    )
    assert "provider (install" not in message and ")s" not in message


def test_model_keys_say_which_key_is_missing() -> None:
    pack = pack_with(("fast", "openai"), ("local", "local"), ("gone", "nowhere"))
    providers = {"openai": Keyed(), "local": Keyless()}
    entries = model_keys([pack], providers, {}.get)
    assert [(e.model.name, e.variable, e.missing) for e in entries] == [
        ("fast", "OPENAI_API_KEY", True),
        ("local", None, False),
        ("gone", None, True),
    ]
    assert describe_missing(entries[0]) == "p/fast (openai fast-1): OPENAI_API_KEY is not set"
    assert describe_missing(entries[2]) == (
        "p/gone (nowhere gone-1): provider 'nowhere' is not installed"
    )
    present = model_keys([pack], providers, {"OPENAI_API_KEY": "k"}.get)
    assert not present[0].missing


def test_a_models_own_key_variable_wins() -> None:
    model = define_model(
        name="fast", provider="openai", model="m", provider_options={"key_variable": "MY_KEY"}
    )
    pack = Pack(
        name="p",
        agents=[define_agent(name="a", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model="fast", prompt="x")],
        models=[model],
    )
    (entry,) = model_keys([pack], {"openai": Keyed()}, {"OPENAI_API_KEY": "k"}.get)
    assert entry.variable == "MY_KEY" and entry.missing


def test_test_provider_needs_no_key() -> None:
    (entry,) = model_keys([pack_with(("fast", "test"))], {"test": TestProvider()}, {}.get)
    assert entry.variable is None and not entry.missing
