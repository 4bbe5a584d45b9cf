"""``sa models [--provider NAME]``: the models packs use, and the models each provider reports.

First the models installed packs (and ``--pack`` targets) define, each with its provider, model
id and whether the provider's key variable is set: this part needs no key and no network. Then
each provider is asked through its list endpoint with keys from the process environment; the
models packs use are marked with ``*``. A provider without a key is reported with the variable
to set and skipped. The exit code is 0 unless a provider that has its key fails for every
provider asked.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``models`` command."""
    parser = subparsers.add_parser("models", help="List the models each provider reports.")
    parser.add_argument("--provider", action="append", default=[], help="Only this provider.")
    parser.add_argument("--pack", action="append", default=[], help="Also mark this pack's models.")
    parser.set_defaults(func=models_command)


def _print_pack_models(packs: list[Any], providers: dict[str, Any]) -> None:
    from sa_core.provider_check import model_keys

    entries = model_keys(packs, providers, os.environ.get)
    if not entries:
        print("Models used by packs: none (no pack installed; pass --pack to name one)")
        return
    print("Models used by packs:")
    for entry in entries:
        model = entry.model
        if not entry.installed:
            status = f"provider '{model.provider}' is not installed"
        elif entry.variable is None:
            status = "needs no key"
        elif entry.present:
            status = f"{entry.variable} is set"
        else:
            status = f"key missing: set {entry.variable}"
        print(f"  {entry.pack}/{model.name}: {model.provider} {model.model} ({status})")
    missing = sorted({e.variable for e in entries if e.installed and e.variable and not e.present})
    if missing:
        print(f"Missing keys: {', '.join(missing)}")
    print()


async def models_command(args: argparse.Namespace) -> int:
    """Entry point of ``sa models``."""
    from sa_core.errors import MissingKeyError, SAError
    from sa_core.packloader import installed_packs, load_packs_from
    from sa_core.plugins import create_plugin_host

    host = create_plugin_host(load_entrypoints=True)
    found, _errors = installed_packs()
    packs = [pack for _, pack in found] + [p for t in args.pack for p in load_packs_from(t)]
    defined: dict[tuple[str, str], list[str]] = {}
    for pack in packs:
        for model in pack.models:
            defined.setdefault((model.provider, model.model), []).append(
                f"{pack.name}/{model.name}"
            )
    names = args.provider or sorted(host.providers)
    unknown = [n for n in names if n not in host.providers]
    if unknown:
        print(
            f"error: unknown provider(s): {', '.join(unknown)}. Installed: "
            f"{', '.join(sorted(host.providers))}",
            file=sys.stderr,
        )
        return 1
    _print_pack_models(packs, host.providers)
    failures = 0
    try:
        for name in names:
            provider = host.providers[name]
            lister = getattr(provider, "list_models", None)
            if lister is None:
                print(f"{name}: does not list models")
                continue
            try:
                ids = await lister(os.environ.get)
            except MissingKeyError as exc:
                print(f"{name}: skipped, {exc.variable} is not set (set it to list its models)")
                continue
            except SAError as exc:
                failures += 1
                print(f"{name}: skipped ({exc})")
                continue
            print(f"{name}: {len(ids)} model(s)")
            for model_id in sorted(ids):
                users = defined.get((name, model_id))
                mark = f"  * used by {', '.join(users)}" if users else ""
                print(f"  {model_id}{mark}")
    finally:
        for provider in host.providers.values():
            closer = getattr(provider, "aclose", None)
            if closer is not None:
                await closer()
    return 1 if failures and failures == len(names) else 0
