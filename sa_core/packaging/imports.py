"""Read and rewrite the import statements of copied source files.

:func:`rewrite_imports` moves absolute imports of vendored top-level modules under their new
home (``import weather_desk.tools`` -> ``sa_pack_x._vendor.weather_desk.tools``), editing only
the import statements and leaving every other byte of the file alone. Relative imports need no
change, since a package is copied whole. Module names hidden in strings
(``importlib.import_module("weather_desk.x")``) are not rewritten.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

__all__ = ["imported_top_levels", "rewrite_imports"]


def imported_top_levels(source: str) -> set[str]:
    """Top-level module names a file imports absolutely (``import a.b`` and ``from a import b``).

    A file that does not parse imports nothing as far as this function can tell.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def _moved(name: str, mapping: Mapping[str, str]) -> str | None:
    top, dot, rest = name.partition(".")
    if top not in mapping:
        return None
    return mapping[top] + dot + rest


def _rewrite_import(node: ast.Import, mapping: Mapping[str, str]) -> str | None:
    """``import`` statements: keep what each name binds while importing from the new home."""
    statements: list[str] = []
    kept: list[ast.alias] = []
    for alias in node.names:
        new = _moved(alias.name, mapping)
        if new is None:
            kept.append(alias)
        elif alias.asname:
            statements.append(f"import {new} as {alias.asname}")
        else:
            # "import a.b" binds "a": import the new module, then bind "a" to its new home.
            top = alias.name.split(".")[0]
            parent, _, leaf = mapping[top].rpartition(".")
            if new != mapping[top]:
                statements.append(f"import {new}")
            if parent:
                binding = f"from {parent} import {leaf}"
                statements.append(binding if leaf == top else f"{binding} as {top}")
            else:
                statements.append(f"import {leaf} as {top}" if leaf != top else f"import {leaf}")
    if not statements:
        return None
    if kept:
        statements.insert(0, ast.unparse(ast.Import(names=kept)))
    return "; ".join(statements)


def _rewrite_from(node: ast.ImportFrom, mapping: Mapping[str, str]) -> str | None:
    if node.level != 0 or not node.module:
        return None
    new = _moved(node.module, mapping)
    if new is None:
        return None
    return ast.unparse(ast.ImportFrom(module=new, names=node.names, level=0))


def rewrite_imports(source: str, mapping: Mapping[str, str]) -> str:
    """Rewrite absolute imports of the top-level modules in ``mapping``.

    Args:
        source: the file's text.
        mapping: old top-level module name -> new dotted module name.

    Returns:
        The new text; the input itself when nothing changes or the file does not parse.

    """
    if not mapping:
        return source
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source
    edits: list[tuple[int, int, int, int, str]] = []
    for node in ast.walk(tree):
        replacement: str | None = None
        if isinstance(node, ast.Import):
            replacement = _rewrite_import(node, mapping)
        elif isinstance(node, ast.ImportFrom):
            replacement = _rewrite_from(node, mapping)
        else:
            continue
        if replacement is not None and node.end_lineno is not None:
            end_col = node.end_col_offset if node.end_col_offset is not None else 0
            edits.append((node.lineno, node.col_offset, node.end_lineno, end_col, replacement))
    if not edits:
        return source
    lines = source.encode("utf-8").splitlines(keepends=True)
    for start, start_col, end, end_col, text in sorted(edits, reverse=True):
        head = lines[start - 1][:start_col]
        tail = lines[end - 1][end_col:]
        lines[start - 1 : end] = [head + text.encode("utf-8") + tail]
    return b"".join(lines).decode("utf-8")
