"""Docs that are generated or referenced stay in step with the code."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_hooks_reference_is_generated_from_the_specs():
    spec = importlib.util.spec_from_file_location("gen_hooks", ROOT / "docs" / "gen_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "hooks.md").read_text() == module.render(), "run python docs/gen_hooks.py"


def test_readme_links_point_to_existing_files():
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if "://" not in target:
            assert (ROOT / target).exists(), target
