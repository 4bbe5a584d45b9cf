"""The redaction plugin: registered without installing it, checked on stored messages."""

from __future__ import annotations

import importlib
import json
import tomllib
from pathlib import Path

import pytest
import sa_plugin_redact
from pydantic import BaseModel
from sa_plugin_redact import CARD, EMAIL, PHONE, SECRET, Redactor, luhn_valid, redact_text

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.plugins import create_plugin_host
from sa_core.testing import TestProvider, TestScript

PLUGIN_DIR = Path(__file__).resolve().parents[1]
TOKEN = "tok_live_5f3a9c"
received: list[str] = []


class LookupArgs(BaseModel):
    email: str


def lookup(state, args: LookupArgs) -> str:
    received.append(args.email)
    return f"Account of {args.email}; API token {state.env('API_TOKEN')}; owner ops@example.com"


def make_pack() -> Pack:
    tool = define_tool(
        name="lookup",
        description="Find an account.",
        args=LookupArgs,
        execute=lookup,
        variables=[{"name": "API_TOKEN", "type": "secret", "required": True}],
    )
    prompt = define_prompt(
        name="main", model="m", prompt="Help.", include_chat=True, tools=["lookup"]
    )
    return Pack(
        name="crm",
        agents=[define_agent(name="helper", side_a={"prompt": "main"})],
        prompts=[prompt],
        models=[define_model(name="m", provider="test", model="m")],
        tools=[tool],
    )


def script() -> TestScript:
    return (
        TestScript()
        .add_tool_call_response([{"name": "lookup", "arguments": {"email": "jane@example.com"}}])
        .add_text_response(f"Done. Card 5555 5555 5555 4444 on file; token {TOKEN}.")
    )


USER = (
    "I am jane@example.com, card 4111 1111 1111 1111 (not 4111 1111 1111 1112), "
    "call me on +44 20 7946 0958 about order A1001 from 2024-01-15."
)


@pytest.mark.asyncio
@pytest.mark.parametrize("plugin", [sa_plugin_redact, Redactor()], ids=["module", "instance"])
async def test_stored_messages_are_redacted(sa_runtime_factory, plugin) -> None:
    received.clear()
    provider = TestProvider(script())
    async with sa_runtime_factory(
        packs=[make_pack()], providers={"test": provider}, plugins=[plugin]
    ) as rt:
        thread = await rt.create_thread("helper", env={"API_TOKEN": TOKEN})
        await thread.send_message(USER)
        user, assistant, tool, final = (await thread.get_messages()).messages

    assert user.content == (
        f"I am {EMAIL}, card {CARD} (not 4111 1111 1111 1112), "
        f"call me on {PHONE} about order A1001 from 2024-01-15."
    )
    # the tool ran with the real arguments; only the stored copy is redacted
    assert received == ["jane@example.com"]
    assert json.loads(assistant.tool_calls[0].function.arguments) == {"email": EMAIL}
    # tool results: the runtime itself scrubs secret values a tool returns; the plugin adds emails
    assert tool.content.startswith(f"Account of {EMAIL}; API token ")
    assert tool.content.endswith(f"; owner {EMAIL}") and TOKEN not in tool.content
    assert final.content == f"Done. Card {CARD} on file; token {SECRET}."  # an update
    # the model's context is built from the store: it never saw the raw values either
    assert "jane@example.com" not in repr(provider.last_request.messages)


@pytest.mark.asyncio
async def test_updates_and_thread_typed_secrets_are_redacted(sa_runtime_factory) -> None:
    async with sa_runtime_factory(packs=[make_pack()], plugins=[sa_plugin_redact]) as rt:
        thread = await rt.create_thread(
            "helper",
            env={"API_TOKEN": TOKEN, "PASSWORD": "hunter2-pass"},
            env_types={"PASSWORD": "secret"},
        )
        message = await thread.inject_message({"role": "user", "content": "pw is hunter2-pass"})
        updated = await thread.update_message(message.id, {"content": "write to bob@example.org"})
        stored = await thread.get_message(message.id)
    assert message.content == f"pw is {SECRET}"
    assert updated.content == stored.content == f"write to {EMAIL}"


@pytest.mark.asyncio
async def test_a_configured_instance_keeps_what_it_is_told_to(sa_runtime_factory) -> None:
    plugin = Redactor(phones=False, secrets=False)
    async with sa_runtime_factory(packs=[make_pack()], plugins=[plugin]) as rt:
        thread = await rt.create_thread("helper", env={"API_TOKEN": TOKEN})
        stored = await thread.inject_message(
            {"role": "user", "content": f"+1 415 555 0132, {TOKEN}, a@b.io"}
        )
    assert stored.content == f"+1 415 555 0132, {TOKEN}, {EMAIL}"


@pytest.mark.asyncio
async def test_without_the_plugin_nothing_is_redacted(sa_runtime_factory) -> None:
    async with sa_runtime_factory(packs=[make_pack()]) as rt:
        thread = await rt.create_thread("helper", env={"API_TOKEN": TOKEN})
        stored = await thread.inject_message({"role": "user", "content": USER})
    assert stored.content == USER


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4012-8888-8888-1881 paid", f"{CARD} paid"),
        ("378282246310005", CARD),  # 15-digit Amex
        ("1234 5678 9012 3456", "1234 5678 9012 3456"),  # fails Luhn
        ("call (555) 123-4567.", f"call {PHONE}."),
        ("415-555-0132 or +1 415 555 0132", f"{PHONE} or {PHONE}"),
        ("ip 192.168.1.10, pi 3.14159265, isbn 978-3-16-148410-0", None),
        ("dates 2024-01-15 and 15.01.2024, id 1234567", None),
        ("First.Last@Sub.Example.ORG", EMAIL),
        ("not an email: user@localhost", None),
    ],
)
def test_redact_text(text: str, expected: str | None) -> None:
    assert redact_text(text) == (text if expected is None else expected)


def test_secrets_win_and_short_values_are_ignored() -> None:
    assert redact_text("key a@b.io-XYZ", ["a@b.io-XYZ"]) == f"key {SECRET}"
    assert redact_text("yes, abc", ["abc"]) == "yes, abc"


def test_luhn() -> None:
    assert luhn_valid("4111111111111111") and luhn_valid("79927398713")
    assert not luhn_valid("4111111111111112") and not luhn_valid("41x1")


def test_entry_point_is_declared_in_the_sa_group() -> None:
    project = tomllib.loads((PLUGIN_DIR / "pyproject.toml").read_text())
    entry_points = project["project"]["entry-points"]
    assert entry_points["sa"] == {"sa_plugin_redact": "sa_plugin_redact"}
    assert "sa.packs" not in entry_points
    module = importlib.import_module(entry_points["sa"]["sa_plugin_redact"])
    host = create_plugin_host(load_entrypoints=False, plugins=[module])
    for hook in ("sa_before_create_message", "sa_before_update_message"):
        impls = getattr(host.manager.hook, hook).get_hookimpls()
        assert any(impl.plugin is module for impl in impls)


def test_identifiers_are_never_redacted() -> None:
    import random
    import uuid

    rng = random.Random(20261124)
    for _ in range(20_000):
        ident = uuid.UUID(int=rng.getrandbits(128), version=4)
        for form in (str(ident), ident.hex, f"call_{ident.hex[:24]}", str(ident).upper()):
            text = f"Child {form} finished; ask {form}, then (ref {form})."
            assert redact_text(text) == text, form


def test_numbers_next_to_identifiers_are_still_redacted() -> None:
    ref = "5f2a1b3c-1234-4567-8901-234567890123"
    text = f"child {ref} says call 415-555-0132, card 4012-8888-8888-1881"
    assert redact_text(text) == f"child {ref} says call {PHONE}, card {CARD}"
