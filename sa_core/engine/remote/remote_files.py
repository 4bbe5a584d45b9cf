"""The files a remote agent answers with by URL: downloaded and kept as the child's files.

An A2A file part carries its bytes (``raw``) or a ``url``. :func:`fetch_linked` downloads
each ``url`` part of a completed answer (:func:`sa_core.remote_http.download`), so the child
keeps the file as it keeps inline ones (stored in its files, an attachment of its answer,
handed to the parent). A relative URL is read against the agent's endpoint.

Which URLs are fetched, and with what:

* on the origin of the agent's endpoint (or its card): with the agent's headers (a server of
  ours serves a big answer file from its files API, behind the same key);
* elsewhere: without any header, and only when the host is public (not loopback, private or
  link-local: a remote agent must not make this server read its own network), unless
  ``SA_A2A_FETCH_ALLOW_PRIVATE=1``;
* redirects are not followed; at most :func:`max_bytes` bytes (``SA_A2A_FILE_MAX_BYTES``,
  32 MiB) within :data:`FILE_SECONDS` seconds each (and the exchange's ``timeout``).

A file that cannot be fetched fails the exchange with a :class:`RemoteError`
(``remote_file``) naming the agent, the file and its URL without its query (which may hold a
signature); header values never appear in it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from sa_core.engine.remote.remote_client import RemoteError, endpoint, where
from sa_core.engine.remote.remote_task import Answer, RemoteFile
from sa_core.remote_http import DownloadError, download, public_host, shown_url

if TYPE_CHECKING:
    from sa_core.engine.remote.remote_client import Connection

MAX_BYTES = "SA_A2A_FILE_MAX_BYTES"
"""The variable setting the largest file downloaded from a remote agent (bytes)."""
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
ALLOW_PRIVATE = "SA_A2A_FETCH_ALLOW_PRIVATE"
"""Set to ``1`` to download remote files from loopback and private hosts of other origins."""
FILE_SECONDS = 60.0
"""How long one file's download may take."""


def max_bytes() -> int:
    """The largest file downloaded (``SA_A2A_FILE_MAX_BYTES``, 32 MiB)."""
    try:
        return max(int(os.environ.get(MAX_BYTES, DEFAULT_MAX_BYTES)), 1)
    except ValueError:
        return DEFAULT_MAX_BYTES


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


async def fetch_linked(conn: Connection, answer: Answer) -> Answer:
    """The answer with every ``url`` file downloaded (see the module docstring).

    Raises:
        RemoteError: a file could not be downloaded (``remote_file``).
    """
    if not any(f.url for f in answer.files):
        return answer
    chosen = endpoint(conn.card)
    base = chosen.url if chosen is not None else conn.remote.card_url
    files = [await _fetched(conn, base, f) if f.url else f for f in answer.files]
    return Answer(answer.text, answer.data, files)


async def _fetched(conn: Connection, base: str, file: RemoteFile) -> RemoteFile:
    """One ``url`` file with its bytes."""
    url = urljoin(base, file.url)
    shown = shown_url(url)
    own = _origin(url) in (_origin(base), _origin(conn.remote.card_url))
    try:
        if urlsplit(url).scheme not in ("http", "https"):
            raise DownloadError("only http and https URLs are fetched")
        allowed = os.environ.get(ALLOW_PRIVATE, "").strip().lower() in ("1", "true", "yes")
        if not own and not allowed and not await public_host(url):
            raise DownloadError(
                f"its host is not public (set {ALLOW_PRIVATE}=1 to allow private hosts)"
            )
        data = await download(url, conn.headers if own else {}, max_bytes(), FILE_SECONDS)
    except DownloadError as exc:
        raise RemoteError(
            conn.scrub(
                f"{where(conn.remote)} answered with the file '{file.name}' at {shown}, "
                f"which could not be fetched: {exc}"
            ),
            "remote_file",
        ) from None
    return RemoteFile(file.name, file.mime_type, data)


__all__ = ["ALLOW_PRIVATE", "FILE_SECONDS", "MAX_BYTES", "fetch_linked", "max_bytes"]
