"""The whole round trip on this machine, offline.

`sa pack` an agent, `sa publish` the files with twine to a pypiserver on 127.0.0.1 (started here,
with a password), `pip install --index-url` the pack into a fresh virtual environment, then in
that environment `sa packs` lists it and a thread of its entry agent runs on the test provider.

The fresh environment is made with ``python -m venv --without-pip``. standard-agents is installed
into it from a copy of this repository (``--no-build-isolation --no-index``, so no network);
its dependencies, and setuptools to build it, are this environment's own, exposed through a
directory of symbolic links named in a ``.pth`` file, so nothing else installed here (the
editable standard-agents, other packs) is visible there. pip runs with ``--python`` pointing at
the fresh interpreter and without the machine's pip configuration.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
import warnings
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from serve_process import free_port

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "packaging" / "weather_desk"
USER, PASSWORD = "uploader", "s3cret-pass"

THREAD_SCRIPT = """
import asyncio, json, sys
import sa_core
from sa_core import Runtime
from sa_core.testing import TestProvider, TestScript


async def main():
    script = (
        TestScript()
        .add_tool_call_response([{"name": "weather", "arguments": {"city": "Oslo"}}])
        .add_text_response("It is sunny in Oslo.")
    )
    provider = TestProvider(script)
    url = "sqlite:///" + sys.argv[1]
    async with Runtime(providers={"test": provider}, database_url=url) as runtime:
        source = runtime.pack_sources["forecaster"]
        thread = await runtime.create_thread("forecaster/forecaster")
        await thread.send_message("Weather in Oslo?")
        await runtime.wait_idle(timeout=60)
        page = await thread.get_messages()
        tool = runtime.registry.scope("forecaster").tools["weather"]
        print(json.dumps({
            "errors": [str(e) for e in runtime.pack_errors],
            "distribution": source.distribution,
            "version": source.version,
            "messages": [[m.role, m.content] for m in page.messages],
            "tool_module": tool.execute.__module__,
            "tool_file": sys.modules[tool.execute.__module__].__file__,
            "sa_core": sa_core.__file__,
            "complete": provider.is_script_complete(),
        }))


asyncio.run(main())
"""


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without pip settings or Python paths, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "PYTHON", "TWINE_", "VIRTUAL_ENV"))
    }
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.update(extra)
    return env


def run(*command: str | Path, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(c) for c in command],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(**extra),
        check=False,
    )
    return result


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"{result.args}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture
def index(tmp_path: Path) -> Iterator[str]:
    """A pypiserver on 127.0.0.1 that wants a password for uploads; yields its base URL."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from passlib.apache import HtpasswdFile

        passwords = HtpasswdFile(str(tmp_path / "htpasswd"), new=True)
        passwords.set_password(USER, PASSWORD)
        passwords.save()
    packages = tmp_path / "index"
    packages.mkdir()
    port = free_port()
    log = open(tmp_path / "pypiserver.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pypiserver",
            "run",
            "-i",
            "127.0.0.1",
            "-p",
            str(port),
            "-P",
            str(tmp_path / "htpasswd"),
            "-a",
            "update",
            "--disable-fallback",
            str(packages),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=clean_env(),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{url}/simple/", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(
                        f"pypiserver did not start: {(tmp_path / 'pypiserver.log').read_text()}"
                    )
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)
        log.close()


def dependency_closure(root: str) -> set[str]:
    """Distributions ``root`` needs here, transitively (extras left out), without ``root``."""
    found: set[str] = set()
    todo = [root]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        found.add(name)
        for text in metadata.distribution(name).requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return found - {canonicalize_name(root)}


def link_distributions(names: set[str], target: Path) -> None:
    """Symlink the installed files of each distribution (modules and dist-info) into ``target``."""
    target.mkdir()
    for name in sorted(names):
        dist = metadata.distribution(name)
        tops = {f.parts[0] for f in dist.files or [] if f.parts and f.parts[0] != ".."}
        for top in sorted(tops):
            source = Path(str(dist.locate_file(top)))
            if top.endswith(".pth") or top == "__pycache__" or not source.exists():
                continue
            if not (target / top).exists():
                (target / top).symlink_to(source)


def fresh_venv(tmp_path: Path) -> Path:
    """A venv without pip whose only extra paths are standard-agents' dependencies."""
    venv = tmp_path / "venv"
    ok(run(sys.executable, "-m", "venv", "--without-pip", venv))
    python = venv / "bin" / "python"
    site = Path(
        ok(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")).strip()
    )
    deps = tmp_path / "deps"
    link_distributions(dependency_closure("standard-agents") | {"setuptools"}, deps)
    (site / "sa_test_deps.pth").write_text(f"{deps}\n")
    return python


def copy_repository(target: Path) -> Path:
    """The files that build standard-agents, copied so the build never writes into the repo."""
    target.mkdir()
    shutil.copy2(REPO / "pyproject.toml", target)
    for optional in ("README.md", "LICENSE"):
        if (REPO / optional).exists():
            shutil.copy2(REPO / optional, target)
    for package in ("sa_core", "sa_hooks", "sa_providers"):
        shutil.copytree(
            REPO / package, target / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    return target


def pip(python: Path, *args: str | Path, timeout: float = 180) -> str:
    return ok(
        run(
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "install",
            "--no-cache-dir",
            *args,
            timeout=timeout,
        )
    )


def test_pack_publish_install_list_and_run(tmp_path: Path, index: str) -> None:
    timings: dict[str, float] = {}
    started = time.monotonic()

    def lap(name: str) -> None:
        nonlocal started
        timings[name] = round(time.monotonic() - started, 2)
        started = time.monotonic()

    packed = tmp_path / "packed"
    out = ok(
        run(
            sys.executable,
            "-m",
            "sa_core.cli",
            "pack",
            FIXTURE,
            "--agent",
            "forecaster",
            "--out",
            packed,
        )
    )
    assert "as sa-pack-forecaster 0.1.0" in out and "PASSED" in out
    lap("sa pack")

    refused = run(
        sys.executable,
        "-m",
        "sa_core.cli",
        "publish",
        packed / "dist",
        "--repository-url",
        f"{index}/",
        TWINE_USERNAME=USER,
        TWINE_PASSWORD="wrong",
    )
    assert refused.returncode != 0
    published = ok(
        run(
            sys.executable,
            "-m",
            "sa_core.cli",
            "publish",
            packed / "dist",
            "--repository-url",
            f"{index}/",
            TWINE_USERNAME=USER,
            TWINE_PASSWORD=PASSWORD,
        )
    )
    assert "Uploading 2 file(s)" in published and "Uploading distributions to" in published
    with urllib.request.urlopen(f"{index}/simple/sa-pack-forecaster/", timeout=5) as response:
        listing = response.read().decode()
    assert "sa_pack_forecaster-0.1.0-py3-none-any.whl" in listing
    lap("sa publish")

    python = fresh_venv(tmp_path)
    pip(
        python, "--no-deps", "--no-build-isolation", "--no-index", copy_repository(tmp_path / "src")
    )
    lap("install standard-agents")
    pip(python, "--index-url", f"{index}/simple/", "sa-pack-forecaster")
    scaffold = ok(run(python, "-m", "sa_core.cli", "new", "pack", "tide-desk", "--dir", tmp_path))
    assert "Created" in scaffold
    pip(python, "--no-deps", "--no-build-isolation", "--no-index", "-e", tmp_path / "tide-desk")
    lap("install pack + editable scaffold")

    listing = ok(run(python.parent / "sa", "packs"))
    assert "forecaster  sa-pack-forecaster 0.1.0" in listing
    assert "  author:       Ada Lovelace <ada@example.com>" in listing
    assert "  license:      MIT" in listing and "  entry agents: forecaster" in listing
    assert "by pip (built by sa pack)" in listing
    assert "tide_desk  tide-desk 0.1.0" in listing
    assert f"editable project {tmp_path / 'tide-desk'}" in listing
    lap("sa packs")

    script = tmp_path / "thread.py"
    script.write_text(THREAD_SCRIPT)
    report = json.loads(ok(run(python, script, tmp_path / "fresh.db")).strip().splitlines()[-1])
    lap("thread")
    assert report["errors"] == []
    assert (report["distribution"], report["version"]) == ("sa-pack-forecaster", "0.1.0")
    assert report["messages"][-2:] == [
        ["tool", "Sunny in Oslo"],
        ["assistant", "It is sunny in Oslo."],
    ]
    assert report["complete"] is True
    assert report["tool_module"] == "sa_pack_forecaster._vendor.weather_desk.tools"
    venv_root = str(python.parent.parent)
    assert report["tool_file"].startswith(venv_root) and report["sa_core"].startswith(venv_root)
    print("round trip timings (s):", timings)
