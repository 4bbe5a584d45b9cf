"""``sa publish DIST_DIR``: upload a packed distribution with twine.

Credentials come from twine's usual sources: ``TWINE_USERNAME`` / ``TWINE_PASSWORD`` (for PyPI,
``__token__`` and an API token), ``~/.pypirc`` and keyring. ``--repository-url`` (or
``TWINE_REPOSITORY_URL``) picks another index, such as a private pypiserver.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``publish`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "publish",
        help="upload a packed distribution with twine",
        description=(
            "Upload the wheel and sdist in DIST_DIR (or DIST_DIR/dist) with twine, showing its "
            "progress. Credentials come from TWINE_USERNAME/TWINE_PASSWORD, ~/.pypirc or keyring."
        ),
    )
    parser.add_argument("dist_dir", metavar="DIST_DIR", type=Path, help="directory of the files")
    parser.add_argument("--repository-url", metavar="URL", help="the index's upload URL")
    parser.add_argument("--repository", metavar="NAME", help="a repository named in ~/.pypirc")
    parser.add_argument(
        "--skip-existing", action="store_true", help="skip files the index already has"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``sa publish``; return twine's exit code."""
    from sa_core.packaging.builder import distribution_files, twine_upload

    files = distribution_files(args.dist_dir)
    target = args.repository_url or args.repository or "the default repository (PyPI)"
    print(f"Uploading {len(files)} file(s) to {target}:", flush=True)
    for file in files:
        print(f"  {file.name}", flush=True)
    code = twine_upload(
        files,
        repository_url=args.repository_url,
        repository=args.repository,
        skip_existing=args.skip_existing,
    )
    if code != 0:
        print(f"twine upload failed (exit code {code}); see its output above.")
    return code
