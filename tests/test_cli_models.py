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
    pack_file.write_text(
        textwrap.dedent("""
        from sa_core import Pack, define_agent, define_model, define_prompt
        pack = Pack(name="p", agents=[define_agent(name="a", side_a={"prompt": "m"})],
                    prompts=[define_prompt(name="m", model="big", prompt="x")],
                    models=[define_model(name="big", provider="listing", model="large-2")])
    """)
    )
    code = main(["models", "--pack", str(pack_file)])
    out = capsys.readouterr().out
    assert code == 0
    assert "listing: 2 model(s)" in out
    assert "large-2  * used by p/big" in out and "small-1\n" in out
    assert "locked: skipped, LOCKED_API_KEY is not set (set it to list its models)" in out


class KeyedListing(Listing):
    name = "keyed"
    key_variable = "KEYED_API_KEY"

    async def list_models(self, env):
        if not env(self.key_variable):
            raise MissingKeyError(self.name, self.key_variable)
        return ["k-1"]


class KeyedPlugin:
    @hookimpl
    def sa_register_providers(self, register):
        register(KeyedListing())


def test_models_without_keys_lists_pack_models_and_missing_keys_and_exits_0(
    monkeypatch, tmp_path, capsys
):
    def factory(**kwargs):
        return create_plugin_host(load_entrypoints=False, plugins=[KeyedPlugin()])

    monkeypatch.setattr("sa_core.plugins.create_plugin_host", factory)
    monkeypatch.delenv("KEYED_API_KEY", raising=False)
    pack_file = tmp_path / "keyed_pack.py"
    pack_file.write_text(
        textwrap.dedent("""
        from sa_core import Pack, define_agent, define_model, define_prompt
        pack = Pack(name="kp", agents=[define_agent(name="a", side_a={"prompt": "m"})],
                    prompts=[define_prompt(name="m", model="big", prompt="x")],
                    models=[define_model(name="big", provider="keyed", model="k-1"),
                            define_model(name="gone", provider="typo", model="t-1")])
    """)
    )
    code = main(["models", "--pack", str(pack_file)])
    out = capsys.readouterr().out
    assert code == 0
    assert "Models used by packs:" in out
    assert "  kp/big: keyed k-1 (key missing: set KEYED_API_KEY)" in out
    assert "  kp/gone: typo t-1 (provider 'typo' is not installed)" in out
    assert "Missing keys: KEYED_API_KEY" in out
    assert "keyed: skipped, KEYED_API_KEY is not set" in out

    monkeypatch.setenv("KEYED_API_KEY", "k")
    assert main(["models", "--pack", str(pack_file)]) == 0
    out = capsys.readouterr().out
    assert "  kp/big: keyed k-1 (KEYED_API_KEY is set)" in out
    assert "k-1  * used by kp/big" in out


def test_models_rejects_an_unknown_provider(host, capsys):
    assert main(["models", "--provider", "nope"]) == 1
    assert "unknown provider(s): nope" in capsys.readouterr().err


def test_plugins_lists_registrations(host, capsys):
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "provider listing" in out and "provider locked" in out


def test_plugins_name_each_plugins_distribution_and_version(capsys):
    from importlib.metadata import version

    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    framework = version("standard-agents")
    assert f"sa_openai (standard-agents {framework}): provider openai" in out
    assert f"sa_builtin_hooks (standard-agents {framework}):" in out
    assert "sa-plugin-redact " in out


def test_version_prints_the_installed_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"sa {version('standard-agents')}\n"
