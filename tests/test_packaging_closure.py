"""Closure analysis, LICENSE templates and identity rules behind `sa pack`."""

from __future__ import annotations

from pathlib import Path

import pytest

from sa_core import Pack, define_agent, define_effect, define_model, define_prompt, define_tool
from sa_core.errors import DefinitionNotFoundError
from sa_core.packaging import PackagingError, compute_closure, license_text
from sa_core.packaging.identity import bump_version, default_distribution, module_for, split_author
from sa_core.packaging.imports import imported_top_levels, rewrite_imports
from sa_core.packaging.licenses import metadata_expression
from sa_core.packloader import load_packs_from

FIXTURE = Path(__file__).parent / "fixtures" / "packaging" / "weather_desk"


@pytest.fixture(scope="module")
def weather_desk() -> Pack:
    return load_packs_from(str(FIXTURE))[0]


def test_closure_follows_prompts_includes_tools_models_hooks_and_targets(weather_desk) -> None:
    closure = compute_closure(weather_desk, "forecaster")
    assert closure.names() == {
        "agents": ["forecaster", "researcher", "billing"],
        "prompts": [
            "house_style",
            "forecast_main",
            "summarize",
            "research_worker",
            "research_reviewer",
            "billing_main",
        ],
        "models": ["fast", "backup"],
        "tools": ["weather", "shout", "approve"],
        "hooks": ["trim"],
        "effects": ["notify"],
        "endpoints": ["get_status"],
    }
    assert closure.roles == {"researcher": "subagent", "billing": "handoff"}
    assert closure.external == []


def test_closure_leaves_out_what_only_other_agents_use(weather_desk) -> None:
    names = compute_closure(weather_desk, "forecaster").names()
    assert "greeter" not in names["agents"] and "greeter_main" not in names["prompts"]
    assert "wave" not in names["tools"] and "chatty" not in names["models"]
    assert "unused" not in names["effects"]


def test_closure_reports_definitions_shared_with_agents_left_out(weather_desk) -> None:
    shared = compute_closure(weather_desk, "forecaster").shared_with_other_agents()
    assert "prompt 'house_style' is also used by agent 'greeter'" in shared


def test_closure_of_a_subagent_is_only_its_own_graph(weather_desk) -> None:
    names = compute_closure(weather_desk, "researcher").names()
    assert names["agents"] == ["researcher"]
    assert names["prompts"] == ["research_worker", "research_reviewer"]
    assert names["tools"] == ["approve"] and "effects" not in names


def test_closure_reports_external_references() -> None:
    model = define_model(name="fast", provider="test", model="m")
    prompt = define_prompt(
        name="main",
        model="shared_model",
        prompt="x",
        tools=["other/desk", "search", "provider:web_search", "ghost"],
    )
    pack = Pack(
        name="p",
        agents=[define_agent(name="a", side_a={"prompt": "main"})],
        prompts=[prompt],
        models=[model],
    )
    closure = compute_closure(pack, "a", known_tools=["search"])
    assert closure.external == [
        "model 'shared_model' (shared from another pack)",
        "agent 'other/desk' (an entry agent of another pack)",
        "tool 'search' (a plugin tool)",
        "tool 'ghost' (a plugin tool, or another pack's entry agent)",
    ]
    assert closure.models == []


def test_closure_follows_tool_uses_and_effects_named_in_code() -> None:
    async def first(state, args):
        await state.schedule_effect("ping", {})

    def ping(state, args):
        state.schedule_effect("pong", {})

    tools = [
        define_tool(name="outer", execute=first, uses=["inner"]),
        define_tool(name="inner", execute=lambda s, a: "x"),
    ]
    effects = [
        define_effect(name="ping", execute=ping),
        define_effect(name="pong", execute=lambda s, a: None),
        define_effect(name="never", execute=lambda s, a: None),
    ]
    prompt = define_prompt(name="main", model="m", prompt="x", tools=["outer"])
    pack = Pack(
        name="p",
        agents=[define_agent(name="a", side_a={"prompt": "main"})],
        prompts=[prompt],
        models=[define_model(name="m", provider="test", model="m")],
        tools=tools,
        effects=effects,
    )
    names = compute_closure(pack, "a").names()
    assert names["tools"] == ["outer", "inner"]
    assert names["effects"] == ["ping", "pong"]


def test_closure_of_an_unknown_agent_names_the_known_ones(weather_desk) -> None:
    with pytest.raises(DefinitionNotFoundError, match="forecaster"):
        compute_closure(weather_desk, "forcaster")


# -- LICENSE texts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spdx", "needle"),
    [
        ("MIT", "Permission is hereby granted, free of charge"),
        ("Apache-2.0", "Apache License"),
        ("ISC", "Permission to use, copy, modify, and/or distribute"),
        ("GPL-3.0", "GNU General Public License"),
        ("GPL-3.0-or-later", "any later version"),
        ("BSD-3-Clause", "Neither the name of the copyright holder"),
        ("UNLICENSED", "All rights reserved"),
        ("mit", "MIT License"),
    ],
)
def test_license_templates_name_the_holder_and_year(spdx: str, needle: str) -> None:
    text = license_text(spdx, holder="Ada Lovelace", year=2031)
    assert needle in text
    assert "2031" in text and "Ada Lovelace" in text
    assert "${" not in text


def test_license_holder_defaults_to_a_placeholder() -> None:
    assert "Copyright (c) 2030 [COPYRIGHT HOLDER]" in license_text("MIT", year=2030)


def test_other_spdx_ids_get_the_id_and_a_copyright_line() -> None:
    text = license_text("MPL-2.0", holder="Ada", year=2030)
    assert text.startswith("SPDX-License-Identifier: MPL-2.0")
    assert "Copyright (c) 2030 Ada" in text


def test_invalid_license_ids_are_refused_with_advice() -> None:
    with pytest.raises(PackagingError, match="not a valid SPDX"):
        license_text("Do what you want")
    assert metadata_expression("UNLICENSED") == "LicenseRef-UNLICENSED"
    assert metadata_expression("apache-2.0") == "Apache-2.0"


# -- identity and import rewriting ----------------------------------------------------------------


def test_names_and_version_bumps() -> None:
    assert default_distribution("weather_bot") == "sa-pack-weather-bot"
    assert module_for("Acme.Weather-Bot") == "acme_weather_bot"
    assert [bump_version(v) for v in ("1.2.3", "1.2", "2.0rc1", "1!3.0.0")] == [
        "1.2.4",
        "1.2.1",
        "2.0.1",
        "1!3.0.1",
    ]
    with pytest.raises(PackagingError, match="PEP 440"):
        bump_version("latest")
    assert split_author("Ada Lovelace <ada@example.com>") == {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
    }
    assert split_author("Ada") == {"name": "Ada"} and split_author(None) is None


def test_rewrite_imports_moves_only_vendored_modules() -> None:
    source = (
        "import os, desk\n"
        "import desk.tools as t\n"
        "from desk.tools import (\n    a,\n    b as c,\n)\n"
        "from .local import x  # relative\n"
        "if True:\n    import desk.helpers\n"
        "s = 'ünï'; from pydantic import BaseModel\n"
    )
    out = rewrite_imports(source, {"desk": "pkg._vendor.desk"})
    assert out == (
        "import os; from pkg._vendor import desk\n"
        "import pkg._vendor.desk.tools as t\n"
        "from pkg._vendor.desk.tools import a, b as c\n"
        "from .local import x  # relative\n"
        "if True:\n    import pkg._vendor.desk.helpers; from pkg._vendor import desk\n"
        "s = 'ünï'; from pydantic import BaseModel\n"
    )
    assert imported_top_levels(out) == {"os", "pkg", "pydantic"}
    assert rewrite_imports("def broken(:\n", {"desk": "x"}) == "def broken(:\n"


def test_closure_takes_the_store_embedding_model_along(weather_desk) -> None:
    from dataclasses import replace

    from sa_core import StoreConfig

    embed = define_model(name="embed", provider="openai", model="e-3", kind="embedding")
    pack = replace(
        weather_desk,
        models=[*weather_desk.models, embed],
        store=StoreConfig(embedding_model="embed", fields=["text"]),
    )
    assert compute_closure(pack, "forecaster").names()["models"] == ["fast", "backup", "embed"]
