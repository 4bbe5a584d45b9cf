"""``sa run AGENT``: an interactive terminal chat with a thread.

Replies stream as they arrive; tool calls show as they start and finish; a tool call that needs
human approval is asked about with a y/n prompt. ``--thread`` resumes a
thread; ``--test-provider`` answers every model with the unscripted test provider, for trying a
pack without API keys.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

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
    parser.add_argument(
        "--test-provider",
        action="store_true",
        help="Answer every model with the offline test provider (no API keys needed).",
    )
    parser.set_defaults(func=run_command)


async def run_command(args: argparse.Namespace) -> int:
    """Entry point of ``sa run``."""
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
        print(f"Thread {thread.thread_id} with {thread.agent_id}. Ctrl-D to quit.", file=sys.stderr)
        await chat(runtime, thread, sys.stdin, sys.stdout)
    finally:
        await runtime.close()
    return 0


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

    agent, scope = runtime._resolve_agent(agent_name, None)
    env = dict(given)
    for declared in graph_variables(scope, agent):
        name = declared.variable.name
        if name not in env and name in os.environ:
            env[name] = os.environ[name]
    return env


async def chat(runtime: Runtime, thread: ThreadState, stdin: TextIO, stdout: TextIO) -> None:
    """Read lines, send them, print streamed replies and tool activity until EOF."""
    from sa_core.store.clock import now_us

    while True:
        stdout.write("\nyou> ")
        stdout.flush()
        line = await asyncio.to_thread(stdin.readline)
        if not line:
            return
        text = line.strip()
        if not text:
            continue
        started = now_us()
        async with runtime.events.subscribe(thread.thread_id) as frames:
            await thread.send_message(text, wait=False)
            await _follow(runtime, thread, frames, stdout)
            while await ask_approvals(thread, stdin, stdout):
                await _follow(runtime, thread, frames, stdout)
        await _report_failures(thread, started, stdout)


async def _follow(
    runtime: Runtime, thread: ThreadState, frames: asyncio.Queue[dict[str, Any]], stdout: TextIO
) -> None:
    """Print the thread's frames until its runner is done."""
    printer = asyncio.create_task(_print_frames(frames, stdout))
    await runtime._wait_thread(thread.thread_id)
    await asyncio.sleep(0)
    printer.cancel()
    await asyncio.gather(printer, return_exceptions=True)
    while not frames.empty():
        _print_frame(frames.get_nowait(), stdout, set())


async def ask_approvals(thread: ThreadState, stdin: TextIO, stdout: TextIO) -> bool:
    """Ask y/n for each tool call awaiting approval; returns whether any was decided."""
    import json

    pending = [p for p in await thread.pending_approvals() if p["status"] == "pending"]
    for item in pending:
        arguments = json.dumps(item["arguments"], ensure_ascii=False)
        stdout.write(f"\n  approve {item['name']}({arguments})? [y/N] ")
        stdout.flush()
        answer = (await asyncio.to_thread(stdin.readline)).strip().lower()
        if answer in ("y", "yes"):
            await thread.approve(item["tool_call_id"])
        else:
            await thread.deny(item["tool_call_id"], "Denied at the terminal by the user.")
    return bool(pending)


async def _report_failures(thread: ThreadState, since: int, stdout: TextIO) -> None:
    """Print why the turn that started at ``since`` failed, if it did.

    A failed turn stores no answer; its ``step_error`` log says what ended it and the model
    calls' ``llm_call`` logs say why each attempt failed (a missing key, a refused request).
    """
    logs = [log for log in await thread.get_logs(limit=100) if log.created_at >= since]
    failures = [log for log in logs if log.type == "step_error" and not log.data.get("depth")]
    if not failures:
        return
    for failure in reversed(failures):
        stdout.write(f"\nerror: the turn failed: {failure.data.get('error')}")
    attempts = [log for log in logs if log.type == "llm_call" and log.data.get("error")]
    causes = list(dict.fromkeys(str(log.data["error"]) for log in reversed(attempts)))
    for cause in causes:
        stdout.write(f"\n  model call: {cause}")
    if any(log.data.get("error_type") == "auth_error" for log in attempts):
        stdout.write("\n  (--test-provider answers every model offline, without keys)")
    stdout.flush()


async def _print_frames(frames: asyncio.Queue[dict[str, Any]], stdout: TextIO) -> None:
    streamed: set[str] = set()
    while True:
        _print_frame(await frames.get(), stdout, streamed)


def _print_frame(frame: dict[str, Any], stdout: TextIO, streamed: set[str]) -> None:
    kind = frame.get("type")
    prefix = f"[{frame['subagent_id'][:8]}] " if frame.get("subagent_id") else ""
    if kind == "message_chunk" and frame.get("depth", 0) == 0 and not prefix:
        if frame["message_id"] not in streamed:
            streamed.add(frame["message_id"])
            stdout.write("\nagent> ")
        stdout.write(frame["chunk"])
    elif kind == "event" and frame.get("eventType") == "tool_call_started":
        stdout.write(f"\n  {prefix}-> {frame['data']['name']}")
    elif kind == "event" and frame.get("eventType") == "tool_call_done":
        stdout.write(f"\n  {prefix}<- {frame['data']['name']} ({frame['data']['status']})")
    elif kind == "message_data" and not prefix:
        data = frame["data"]
        if (
            data.get("role") == "assistant"
            and data.get("status") == "completed"
            and data.get("content")
            and frame["message_id"] not in streamed
            and data.get("depth", 0) == 0
        ):
            stdout.write(f"\nagent> {data['content']}")
    stdout.flush()
