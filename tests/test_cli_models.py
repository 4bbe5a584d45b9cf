"""`sa models` and `sa plugins`."""

from __future__ import annotations

import textwrap

import pytest

from sa_core.cli import main
from sa_core.errors import MissingKeyError
from sa_core.plugins import create_plugin_host
from sa_hooks import hookimpl


class Listing:
    name = "listing"

    async def list_models(self, env):
        return ["small-1", "large-2"]


class Locked:
    name = "locked"

    async def list_models(self, env):
        raise MissingKeyError("locked", "LOCKED_API_KEY")


class Plugin:
    @hookimpl
    def sa_register_providers(self, register):
        register(Listing())
        register(Locked())


@pytest.fixture
def host(monkeypatch):
    def factory(**kwargs):
        return create_plugin_host(load_entrypoints=False, plugins=[Plugin()])

    monkeypatch.setattr("sa_core.plugins.create_plugin_host", factory)


def test_models_lists_each_provider_and_marks_pack_models(host, tmp_path, capsys):
    pack_file = tmp_path / "p.py"
    pack_file.write_text(textwrap.dedent("""
        from sa_core import Pack, define_agent, define_model, define_prompt
        pack = Pack(name="p", agents=[define_agent(name="a", side_a={"prompt": "m"})],
                    prompts=[define_prompt(name="m", model="big", prompt="x")],
                    models=[define_model(name="big", provider="listing", model="large-2")])
    """))
    code = main(["models", "--pack", str(pack_file)])
    out = capsys.readouterr().out
    assert code == 0
    assert "listing: 2 model(s)" in out
    assert "large-2  * used by p/big" in out and "small-1\n" in out
    assert "locked: skipped (Provider 'locked' needs the variable LOCKED_API_KEY" in out


def test_models_rejects_an_unknown_provider(host, capsys):
    assert main(["models", "--provider", "nope"]) == 1
    assert "unknown provider(s): nope" in capsys.readouterr().err


def test_plugins_lists_registrations(host, capsys):
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "provider listing" in out and "provider locked" in out
