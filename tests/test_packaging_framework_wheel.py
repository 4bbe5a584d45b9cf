"""Installing a packed agent where standard-agents is not on the package index, the documented
way (docs/packs.md): ``sa pack --with-framework`` writes the framework's wheel into ``wheels/``,
then ``pip install --find-links <project>/wheels <pack wheel>`` installs both into a fresh
environment, where a thread of the packed agent runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from test_packaging_roundtrip import FIXTURE, THREAD_SCRIPT, fresh_venv, ok, pip, run


def test_sa_pack_with_framework_installs_where_the_framework_is_not_on_the_index(
    tmp_path: Path,
) -> None:
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
            "--with-framework",
            timeout=300,
        )
    )
    wheels = sorted(p.name for p in (packed / "wheels").iterdir())
    assert len(wheels) == 1 and wheels[0].startswith("standard_agents-")
    dist = sorted(p.name for p in (packed / "dist").iterdir())
    assert not any(name.startswith("standard_agents") for name in dist)  # sa publish skips it
    pack_wheel = packed / "dist" / next(n for n in dist if n.endswith(".whl"))
    assert "Install where standard-agents is not on the package index with:" in out
    command = out.strip().splitlines()[-1].split()
    assert command[:3] == ["pip", "install", "--find-links"]
    assert Path(command[3]).resolve() == (packed / "wheels").resolve()
    assert Path(command[4]).resolve() == pack_wheel.resolve()

    python = fresh_venv(tmp_path)
    # The documented command, offline: --no-index keeps pip on this machine (the framework's
    # own dependencies are already importable in the fresh environment).
    pip(python, "--no-index", "--find-links", packed / "wheels", pack_wheel)
    listing = ok(run(python.parent / "sa", "packs"))
    assert "forecaster  sa-pack-forecaster 0.1.0" in listing

    script = tmp_path / "thread.py"
    script.write_text(THREAD_SCRIPT)
    report = json.loads(ok(run(python, script, tmp_path / "fresh.db")).strip().splitlines()[-1])
    assert report["errors"] == []
    assert report["messages"][-1] == ["assistant", "It is sunny in Oslo."]
    venv_root = str(python.parent.parent)
    assert report["sa_core"].startswith(venv_root)  # the framework came from the wheel


def test_without_a_source_tree_the_error_says_how_to_install(monkeypatch) -> None:
    import pytest

    from sa_core.errors import PackagingError
    from sa_core.packaging import framework

    monkeypatch.setattr(framework, "_is_framework_tree", lambda path: False)
    with pytest.raises(PackagingError) as caught:
        framework.framework_source()
    assert "pip install <pack wheel> <standard-agents wheel or path>" in str(caught.value)
