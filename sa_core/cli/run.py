"""``sa run AGENT``: an interactive terminal chat with a thread.

Replies stream as they arrive; tool calls show with their arguments and results (in full with
``--verbose``). ``--thread`` resumes a thread and prints its last messages. ``--test-provider``
answers every model offline: alone with ``Test response received.``, or
``--test-provider=script.yaml`` from a script (see :mod:`sa_core.offline`); in both, a message
``/tool NAME {json}`` makes the offline model call that tool. A tool call that needs human
approval is asked about with a y/n prompt. The chat loop itself is in :mod:`sa_core.cli.chat`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sa_core.runtime import Runtime
    from sa_core.state import ThreadState


def register(subparsers: Any) -> None:
    """Add the ``run`` command."""
    parser = subparsers.add_parser("run", help="Chat with an agent in the terminal.")
    parser.add_argument("agent", help="Agent name (or package/agent).")
    parser.add_argument(
        "--pack", action="append", default=[], help="Module or path of a pack to load."
    )
    parser.add_argument("--db", default=None, help="Database URL (default sqlite:///.sa/sa.db).")
    parser.add_argument(
        "--thread",
        default=None,
        help="Resume this thread id (it keeps its own agent; AGENT is not used).",
    )
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="Thread variable."
    )
    from sa_core.cli.offline_option import add_test_provider_option

    add_test_provider_option(parser)
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="Show tool arguments and results in full (they are shortened otherwise).",
    )
    parser.set_defaults(func=run_command)


async def run_command(args: argparse.Namespace) -> int:
    """Entry point of ``sa run``."""
    from sa_core.cli.chat import chat
    from sa_core.packloader import load_packs_from
    from sa_core.runtime import Runtime

    packs = [pack for target in args.pack for pack in load_packs_from(target)]
    runtime = Runtime(packs=packs, database_url=args.db, offline=args.test_provider)
    await runtime.start()
    try:
        env = dict(item.split("=", 1) for item in args.env if "=" in item)
        if args.thread:
            thread = await runtime.get_thread(args.thread)
            _check_resumable(runtime, thread)
        else:
            thread = await runtime.create_thread(
                args.agent, env=_declared_env(runtime, args.agent, env)
            )
        print(
            f"Thread {thread.thread_id} with {thread.agent_id}. Ctrl-D to quit, Ctrl-C stops "
            "an answer.",
            file=sys.stderr,
        )
        await chat(
            runtime,
            thread,
            sys.stdin,
            sys.stdout,
            verbose=args.verbose,
            resume_command=resume_command(args, thread),
            resumed=bool(args.thread),
        )
    finally:
        await runtime.close()
    return 0


def resume_command(args: argparse.Namespace, thread: ThreadState) -> str:
    """The ``sa run`` command line that resumes ``thread`` with the same options."""
    words = ["sa", "run", thread.agent_id, "--thread", thread.thread_id]
    for pack in args.pack:
        words += ["--pack", pack]
    if args.db:
        words += ["--db", args.db]
    if args.test_provider is True:
        words.append("--test-provider")
    elif args.test_provider:
        words.append(f"--test-provider={args.test_provider}")
    return shlex.join(words)


def _check_resumable(runtime: Runtime, thread: ThreadState) -> None:
    """Refuse a ``--thread`` whose package is not loaded (its turns could not run)."""
    from sa_core.errors import SAError

    if thread.package not in runtime.registry.scopes:
        raise SAError(
            f"Thread {thread.thread_id} belongs to package '{thread.package}', which is not "
            f"loaded; pass the pack with --pack (or install it)."
        )


def _declared_env(runtime: Runtime, agent_name: str, given: dict[str, str]) -> dict[str, str]:
    """Given values, plus process-environment values of variables the agent's graph declares."""
    from sa_core.engine.variables import graph_variables

    agent, scope = runtime.registry.entry_agent(agent_name)
    env = dict(given)
    for declared in graph_variables(scope, agent):
        name = declared.variable.name
        if name not in env and name in os.environ:
            env[name] = os.environ[name]
    return env
