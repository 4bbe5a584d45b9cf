"""The ``sa`` command.

Each subcommand lives in its own module under ``sa_core.cli`` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (sync or async, taking the parsed
namespace and returning an exit code). Commands import heavy modules lazily so ``sa --help`` is
fast: it loads the command modules and argparse, and neither asyncio, the runtime, the server
nor the package metadata (``--version`` reads it when asked).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Awaitable, Sequence
from typing import Any

COMMAND_MODULES: tuple[str, ...] = (
    "run",
    "validate",
    "serve",
    "keys",
    "models",
    "packs",
    "new",
    "pack",
    "publish",
    "unpack",
    "plugins",
    "thread",
    "eval",
)


def _version() -> str:
    """The installed version of the framework's distribution (``standard-agents``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("standard-agents")
    except PackageNotFoundError:  # pragma: no cover - running from a bare source tree
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """``--version``: print the version, read from the package metadata only when asked."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(f"{parser.prog} {_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every available subcommand."""
    parser = argparse.ArgumentParser(prog="sa", description="Standard Agents for Python.")
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="print the version")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"sa_core.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"sa_core.cli.{name}":
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``sa`` command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    from sa_core.errors import SAError

    if getattr(args, "interruptible", False):
        _honour_interrupts()
    try:
        result = func(args)
        if isinstance(result, Awaitable):
            import asyncio

            # a command may name its event loop (``sa serve``: requests before turns)
            with asyncio.Runner(loop_factory=getattr(args, "loop_factory", None)) as runner:
                result = runner.run(result)  # type: ignore[arg-type]
    except SAError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return int(result or 0)


def _honour_interrupts() -> None:
    """Let SIGINT stop the command even when it was started with SIGINT ignored.

    A shell starts background commands with SIGINT ignored, and the process inherits that.
    uvicorn handles SIGINT once it serves, but one sent while the server was starting was
    lost and the server ran on; with Python's default handler back, it stops at any point.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
