"""``sa validate [TARGET]``: check packs and report every problem at once.

``TARGET`` is a module (``my_pack`` or ``my_pack:pack``), a ``.py`` file or a project directory
(see :func:`sa_core.packloader.load_packs_from`). Without it, every installed pack (entry-point
group ``sa.packs``) is checked. Tools registered by plugins count as known tools, and installed
packs as known packs for ``pack/agent`` references. A model whose provider no installed plugin
registers is a problem (with a did-you-mean), unless ``--provider NAME`` names it.

Output, per pack::

    ✓ pack support: 2 agents, 3 prompts, 1 model, 2 tools
    warning: pack support: agent 'triage': dual_ai agent has no max_session_turns; ...
    ✗ pack broken: 2 problems
      - prompt 'main': model 'fast' is not a model of the pack; ...
      - agent 'main' side_a: session_stop tool 'done' is not offered by prompt 'main'; ...

``--online`` also reads the agent card of every remote agent (``define_remote_agent``), with
its headers resolved from the environment, and reports a card that cannot be read or names an
endpoint elsewhere.

The exit code is 1 when any pack has problems or fails to load (with ``--strict``, also when
there are warnings), else 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from sa_core.spec import Pack

_COUNTED: tuple[tuple[str, str], ...] = (
    ("agents", "agent"),
    ("prompts", "prompt"),
    ("models", "model"),
    ("tools", "tool"),
    ("hooks", "hook"),
    ("effects", "effect"),
    ("endpoints", "endpoint"),
    ("remote_agents", "remote agent"),
)


def register(subparsers: Any) -> None:
    """Add the ``validate`` command to the ``sa`` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "validate",
        help="check packs for problems",
        description=(
            "Check packs and list every problem at once. TARGET is a module (my_pack or "
            "my_pack:pack), a .py file or a project directory; without it every installed pack "
            "is checked."
        ),
    )
    parser.add_argument(
        "target",
        nargs="?",
        metavar="TARGET",
        help="module, module:attribute, .py file or directory (default: every installed pack)",
    )
    parser.add_argument(
        "--tool",
        dest="tools",
        action="append",
        default=[],
        metavar="NAME",
        help="treat NAME as a known tool provided outside the pack (repeatable)",
    )
    parser.add_argument(
        "--provider",
        dest="providers",
        action="append",
        default=[],
        metavar="NAME",
        help="treat NAME as an installed provider (repeatable)",
    )
    parser.add_argument(
        "--no-plugins",
        action="store_true",
        help="do not load plugins (their tools are then unknown, and providers are not checked)",
    )
    parser.add_argument("--strict", action="store_true", help="fail on warnings too")
    parser.add_argument(
        "--online",
        action="store_true",
        help="also read the agent card of every remote agent (network access)",
    )
    parser.set_defaults(func=run)


def _symbols(stream: TextIO) -> tuple[str, str]:
    """Return check and cross marks, or ASCII stand-ins when the stream cannot encode them."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        "✓✗".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return "OK", "FAIL"
    return "✓", "✗"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def summarize(pack: Pack) -> str:
    """Describe a pack's contents: ``2 agents, 3 prompts, 1 model, 0 tools``.

    Agents, prompts, models and tools are always listed; hooks, effects, endpoints and remote
    agents only when the pack has some.
    """
    parts: list[str] = []
    for attribute, word in _COUNTED:
        count = len(getattr(pack, attribute))
        if count or attribute in ("agents", "prompts", "models", "tools"):
            parts.append(_plural(count, word))
    return ", ".join(parts)


def _plugin_context(out: TextIO) -> tuple[set[str], list[Pack], set[str] | None]:
    """Tool names, packs and provider names registered by plugins.

    A broken plugin becomes a warning; the provider names are then ``None`` (not checked).
    """
    try:
        from sa_core.plugins import create_plugin_host
    except ImportError:
        return set(), [], None
    try:
        host = create_plugin_host()
    except Exception as exc:
        print(
            f"warning: plugins could not be loaded, so plugin tools and providers are unknown: "
            f"{exc}",
            file=out,
        )
        return set(), [], None
    return set(host.tools), list(host.packs), set(host.providers)


def check_packs(
    packs: Sequence[Pack],
    *,
    known_tools: Iterable[str] = (),
    known_packs: Iterable[Pack] = (),
    known_providers: Iterable[str] | None = None,
    strict: bool = False,
    online: bool = False,
    out: TextIO | None = None,
) -> int:
    """Validate packs and print the report.

    Args:
        packs: the packs to check.
        known_tools: tool names provided outside the packs.
        known_packs: other packs whose entry agents may be referenced; ``packs`` are added.
        known_providers: installed provider names; a model naming another provider is a
            problem (with a did-you-mean). ``None`` skips the check.
        strict: count warnings as failures.
        online: also read the agent card of every remote agent (a sound pack only).
        out: where to print (standard output by default).

    Returns:
        The number of packs that failed.

    """
    stream = out if out is not None else sys.stdout
    ok_mark, fail_mark = _symbols(stream)
    tools = list(known_tools)
    everything = [*packs, *(p for p in known_packs if not any(p is q for q in packs))]
    failed = 0
    seen: set[str] = set()
    for pack in packs:
        problems = pack_problems(pack, known_tools=tools, known_packs=everything)
        if online and not problems:
            problems += remote_card_problems(pack)
        if known_providers is not None:
            from sa_core.provider_check import unknown_provider_problems

            problems += unknown_provider_problems(pack, known_providers)
        if pack.name in seen:
            problems.insert(
                0,
                f"pack '{pack.name}': another pack checked here has the same name; pack names "
                f"are package ids and must be unique.",
            )
        seen.add(pack.name)
        warnings = pack.warnings()
        bad = bool(problems) or (strict and bool(warnings))
        failed += bad
        if problems:
            print(f"{fail_mark} pack {pack.name}: {_plural(len(problems), 'problem')}", file=stream)
            for problem in problems:
                print(f"  - {problem}", file=stream)
        elif bad:
            print(
                f"{fail_mark} pack {pack.name}: {_plural(len(warnings), 'warning')} (--strict)",
                file=stream,
            )
        else:
            print(f"{ok_mark} pack {pack.name}: {summarize(pack)}", file=stream)
        for warning in warnings:
            print(f"warning: pack {pack.name}: {warning}", file=stream)
    return failed


def pack_problems(
    pack: Pack, *, known_tools: Iterable[str] = (), known_packs: Iterable[Pack] = ()
) -> list[str]:
    """Return every problem of a pack, as :meth:`Pack.validate` would raise them."""
    from sa_core.errors import PackValidationError

    try:
        pack.validate(known_tools=known_tools, known_packs=known_packs)
    except PackValidationError as exc:
        return list(exc.problems)
    return []


def remote_card_problems(pack: Pack) -> list[str]:
    """Problems found reading the cards of the pack's remote agents (``--online``)."""
    if not pack.remote_agents:
        return []
    import asyncio

    from sa_core.engine.remote.remote_client import card_problems

    async def check() -> list[list[str]]:
        return await asyncio.gather(*(card_problems(r) for r in pack.remote_agents))

    return [problem for found in asyncio.run(check()) for problem in found]


def run(args: argparse.Namespace) -> int:
    """Run ``sa validate``; return the exit code (1 when anything failed)."""
    from sa_core.errors import PackLoadError
    from sa_core.packloader import installed_packs, load_packs_from

    out = sys.stdout
    _, fail_mark = _symbols(out)
    known_tools: set[str] = set(args.tools)
    plugin_packs: list[Pack] = []
    known_providers: set[str] | None = None
    if not args.no_plugins:
        plugin_tools, plugin_packs, known_providers = _plugin_context(out)
        known_tools |= plugin_tools
    if known_providers is not None:
        known_providers |= set(args.providers)

    load_errors: list[PackLoadError] = []
    if args.target:
        try:
            packs = load_packs_from(args.target)
        except PackLoadError as exc:
            print(f"{fail_mark} {exc}", file=out)
            return 1
        installed, _ = installed_packs(validate=False)
        known = [*(p for _, p in installed), *plugin_packs]
    else:
        installed, load_errors = installed_packs(validate=False)
        packs = [p for _, p in installed]
        known = list(plugin_packs)
        if not packs and not load_errors:
            print("No packs installed (entry-point group 'sa.packs'); pass a TARGET to check one.")
            return 0

    failed = check_packs(
        packs,
        known_tools=known_tools,
        known_packs=known,
        known_providers=known_providers,
        strict=args.strict,
        online=args.online,
        out=out,
    )
    for error in load_errors:
        print(f"{fail_mark} {error}", file=out)
    total = len(packs) + len(load_errors)
    if total > 1:
        bad = failed + len(load_errors)
        print(f"{_plural(total, 'pack')} checked, {bad} failed.", file=out)
    return 1 if failed or load_errors else 0
