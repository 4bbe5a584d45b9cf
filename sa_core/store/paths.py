"""Path rules of the thread filesystem: normalisation, globs, and what counts as text."""

from __future__ import annotations

import re
from functools import lru_cache

from sa_core.errors import FileSystemError

DIRECTORY_MIME = "inode/directory"
MAX_NAME_BYTES = 255
"""The longest file or directory name, in UTF-8 bytes (the common filesystem limit)."""
MAX_PATH_BYTES = 4096
"""The longest thread path, in UTF-8 bytes."""
_TEXT_MARKERS = ("json", "xml", "javascript", "yaml", "csv", "markdown", "toml", "x-sh", "sql")


def normalize_path(path: str) -> str:
    """Normalise a thread path to an absolute POSIX path without ``.``/``..``/empty segments.

    Relative paths are taken from the root; ``..`` may not climb above the root.

    Args:
        path: The path as given.

    Returns:
        The normalised absolute path (``/`` for the root).

    Raises:
        FileSystemError: Empty path, NUL byte, a ``..`` escaping the root, a name longer than
            :data:`MAX_NAME_BYTES` or a path longer than :data:`MAX_PATH_BYTES`.

    """
    if not isinstance(path, str) or not path.strip():
        raise FileSystemError(
            f"Invalid path {path!r}: give an absolute path like /attachments/a.txt."
        )
    if "\x00" in path:
        raise FileSystemError("Invalid path: it contains a NUL byte.")
    size = len(path.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH_BYTES:
        raise FileSystemError(
            f"Invalid path: it is {size} bytes long; a path may have at most {MAX_PATH_BYTES} "
            f"bytes (UTF-8). Use a shorter path."
        )
    parts: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not parts:
                raise FileSystemError(f"Invalid path {path!r}: '..' escapes the thread's root.")
            parts.pop()
        else:
            length = len(segment.encode("utf-8", "surrogatepass"))
            if length > MAX_NAME_BYTES:
                raise FileSystemError(
                    f"Invalid path: the name {segment[:40]!r}... is {length} bytes long; a file or "
                    f"directory name may have at most {MAX_NAME_BYTES} bytes (UTF-8). Use a "
                    f"shorter name."
                )
            parts.append(segment)
    return "/" + "/".join(parts)


def split_path(path: str) -> tuple[str, str]:
    """Split a normalised path into (parent directory, name); the root has no name."""
    if path == "/":
        return "/", ""
    parent, _, name = path.rpartition("/")
    return parent or "/", name


def ancestors(path: str) -> list[str]:
    """List the directories above a normalised path, outermost first (the root excluded)."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def is_text_mime(mime_type: str) -> bool:
    """Whether a MIME type holds searchable text."""
    mime = mime_type.lower()
    return mime.startswith("text/") or any(marker in mime for marker in _TEXT_MARKERS)


TEXT_MIME_LIKE = ("text/%", *(f"%{marker}%" for marker in _TEXT_MARKERS))
"""SQL ``LIKE`` patterns selecting the same MIME types as :func:`is_text_mime`."""


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob: ``*`` and ``?`` stay within a segment, ``**`` crosses segments.

    Args:
        pattern: The glob, e.g. ``*.txt`` or ``/attachments/**``.

    Returns:
        A regex matching whole strings.

    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
            continue
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("(?s:" + "".join(out) + r")\Z")


def glob_matches(pattern: str, path: str, name: str) -> bool:
    """Match a glob against a file: patterns with ``/`` match the path, others the name."""
    if "/" in pattern:
        anchored = pattern if pattern.startswith("/") else "/" + pattern
        return glob_regex(anchored).match(path) is not None
    return glob_regex(pattern).match(name) is not None
