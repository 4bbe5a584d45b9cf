"""``sa new pack NAME``: a pack project that installs with ``pip install -e`` and tests itself.

The project::

    NAME/
      pyproject.toml          the sa.packs entry point, a test extra, pytest settings
      README.md
      LICENSE                 when --license is given
      <module>/__init__.py    a model, a tool, a prompt, an agent and the Pack
      tests/test_<module>.py  tests that run the agent on the scripted test provider
      .gitignore

``NAME`` is the distribution name; the module, the pack id and the agent are ``NAME`` with
``-`` written as ``_``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from string import Template

from sa_core.packaging.codegen import toml_value
from sa_core.packaging.errors import PackagingError
from sa_core.packaging.identity import check_distribution_name, module_for, split_author
from sa_core.packaging.licenses import license_text, metadata_expression

__all__ = ["scaffold_pack"]

_FILES: tuple[tuple[str, str], ...] = (
    ("pyproject.toml.tmpl", "pyproject.toml"),
    ("README.md.tmpl", "README.md"),
    ("module/__init__.py.tmpl", "{module}/__init__.py"),
    ("tests/test_pack.py.tmpl", "tests/test_{module}.py"),
    ("gitignore.tmpl", ".gitignore"),
)


def _escaped(text: str) -> str:
    """Text for the inside of a double-quoted TOML or Python string."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def scaffold_pack(
    name: str,
    parent: Path | None = None,
    *,
    author: str | None = None,
    license_id: str | None = None,
    description: str | None = None,
) -> Path:
    """Create a pack project named ``name`` under ``parent`` (the working directory by default).

    Returns:
        The project directory.

    Raises:
        PackagingError: the name is not a valid distribution name, or the directory exists.

    """
    from sa_core import __version__ as core_version

    distribution = check_distribution_name(name)
    module = module_for(distribution)
    project = (parent or Path.cwd()) / distribution
    if project.exists() and any(project.iterdir()):
        raise PackagingError(f"{project} already exists and is not empty; choose another name.")
    title = module.replace("_", " ").strip().title()
    text = " ".join((description or f"The {title} pack.").split())
    extra = ""
    license_line = ""
    if license_id:
        license_line = f"license = {toml_value(metadata_expression(license_id))}\n"
        license_line += 'license-files = ["LICENSE"]\n'
        extra += f'\n    license="{_escaped(license_id)}",'
    authors_line = ""
    if author:
        authors_line = f"authors = [{toml_value(split_author(author))}]\n"
        extra += f'\n    author="{_escaped(author)}",'
    values = {
        "distribution": distribution,
        "module": module,
        "package_id": module,
        "agent": module,
        "title": title,
        "description": text,
        "description_toml": _escaped(text),
        "description_py": _escaped(text),
        "license_line": license_line,
        "authors_line": authors_line,
        "agent_extra": extra,
        "core_version": core_version,
    }
    templates = resources.files("sa_core").joinpath("templates").joinpath("pack")
    for source, destination in _FILES:
        template = templates
        for part in source.split("/"):
            template = template.joinpath(part)
        target = project / destination.format(module=module)
        target.parent.mkdir(parents=True, exist_ok=True)
        content = Template(template.read_text(encoding="utf-8")).substitute(values)
        target.write_text(content, encoding="utf-8")
    if license_id:
        holder = (split_author(author) or {}).get("name") or author
        (project / "LICENSE").write_text(license_text(license_id, holder), encoding="utf-8")
    return project
