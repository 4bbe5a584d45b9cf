"""The chat loop of ``sa run``: read a line, run the turn, print it as it streams.

On a terminal (stdin and stdout both TTYs) the prompt has line editing and history
(``prompt_toolkit``, history in ``.sa/run_history``) and answers render as Markdown (``rich``);
both come with the ``chat`` extra and load only here, so ``sa_core`` imports without them (a
terminal without them gets the plain chat and a hint). Otherwise lines are read from stdin and
printed as plain text, so ``sa run`` stays scriptable.

Keys: Ctrl-C at the prompt quits; Ctrl-C while an answer streams stops the turn and keeps the
text said so far (stored ``completed`` with ``metadata.stopped``); Ctrl-D quits and prints the
command that resumes the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sa_core.cli.chat_render import PlainRenderer, RichRenderer

if TYPE_CHECKING:
    from sa_core.engine.events import Delivered
    from sa_core.runtime import Runtime
    from sa_core.state import ThreadState

HISTORY_FILE = Path(".sa") / "run_history"
"""Where the terminal prompt keeps its input history (under the working directory)."""

RESUME_SHOWN = 10
"""How many of a resumed thread's last messages are printed."""

QUIT = object()
"""What a reader returns when the user quits (Ctrl-D or Ctrl-C at the prompt)."""


def is_terminal(stdin: TextIO, stdout: TextIO) -> bool:
    """Whether both ends are a terminal (then the chat edits lines and renders Markdown)."""
    try:
        return stdin.isatty() and stdout.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_libraries() -> bool:
    """Whether ``prompt_toolkit`` and ``rich`` are installed; say how to get them if not."""
    try:
        import prompt_toolkit  # noqa: F401
        import rich  # noqa: F401
    except ImportError:
        print(
            "note: install the chat extra for line editing, history and Markdown: "
            "pip install 'standard-agents[chat]'",
            file=sys.stderr,
        )
        return False
    return True


class PlainReader:
    """Reads lines from a (possibly piped) stdin; Ctrl-C or end of input quits."""

    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self.stdin = stdin
        self.stdout = stdout

    async def read(self) -> str | object:
        """The next line, or :data:`QUIT`."""
        return await self.ask("\nyou> ")

    async def ask(self, question: str) -> str | object:
        """Print ``question`` and return the answer line, or :data:`QUIT`."""
        self.stdout.write(question)
        self.stdout.flush()
        loop = asyncio.get_running_loop()
        line: asyncio.Future[str] = loop.create_future()

        def work() -> None:  # a daemon thread, so a pending read never blocks exit
            try:
                text = self.stdin.readline()
            except Exception as exc:  # a closed stream ends the chat like EOF
                loop.call_soon_threadsafe(_settle, line, "", exc)
                return
            loop.call_soon_threadsafe(_settle, line, text, None)

        threading.Thread(target=work, daemon=True, name="sa-run-stdin").start()
        interrupted = asyncio.Event()
        with on_sigint(interrupted.set):
            waiter = asyncio.ensure_future(interrupted.wait())
            either: set[asyncio.Future[Any]] = {line, waiter}
            try:
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
        if not line.done() or line.exception() is not None:
            return QUIT
        return line.result() or QUIT


def _settle(future: asyncio.Future[str], value: str, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(value)


class TerminalReader:
    """A ``prompt_toolkit`` prompt with line editing and a persistent history."""

    def __init__(self) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory

        history: Any
        try:
            HISTORY_FILE.parent.mkdir(parents=True, exist_ok=True)
            history = FileHistory(str(HISTORY_FILE))
        except OSError:
            history = InMemoryHistory()
        self.session: Any = PromptSession(history=history)

    async def read(self) -> str | object:
        """The next line, or :data:`QUIT` on Ctrl-D or Ctrl-C."""
        return await self.ask("you> ")

    async def ask(self, question: str) -> str | object:
        """Prompt with ``question``; the answer, or :data:`QUIT` on Ctrl-D or Ctrl-C."""
        try:
            text = await self.session.prompt_async(question)
        except (EOFError, KeyboardInterrupt):
            return QUIT
        return str(text)


@contextlib.contextmanager
def on_sigint(callback: Callable[[], object]) -> Iterator[None]:
    """Call ``callback`` on Ctrl-C (SIGINT) inside the block, then restore the old handler."""
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    try:
        loop.add_signal_handler(signal.SIGINT, callback)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread / platform
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        with contextlib.suppress(TypeError, ValueError):
            signal.signal(signal.SIGINT, previous)


async def chat(
    runtime: Runtime,
    thread: ThreadState,
    stdin: TextIO,
    stdout: TextIO,
    *,
    verbose: bool = False,
    resume_command: str = "",
    resumed: bool = False,
) -> None:
    """Chat until the user quits, then print how to resume.

    Args:
        runtime: the started runtime.
        thread: the thread to chat with.
        stdin: where lines come from.
        stdout: where the conversation goes.
        verbose: show tool arguments and results in full.
        resume_command: the command printed at the end, to resume this thread.
        resumed: print the thread's last messages first.

    """
    terminal = is_terminal(stdin, stdout) and terminal_libraries()
    renderer_class = RichRenderer if terminal else PlainRenderer
    renderer = renderer_class(stdout, verbose=verbose)
    reader = TerminalReader() if terminal else PlainReader(stdin, stdout)
    if resumed:
        page = await thread.get_messages(limit=RESUME_SHOWN, order="desc")
        renderer.history(list(reversed(page.messages)), page.total)
    while True:
        line = await reader.read()
        if line is QUIT:
            break
        text = str(line).strip()
        if text:
            await run_turn(runtime, thread, text, renderer, reader)
    stdout.write("\n")
    stdout.flush()
    if resume_command:
        print(f"Resume this thread with: {resume_command}", file=sys.stderr)


async def run_turn(
    runtime: Runtime,
    thread: ThreadState,
    text: str,
    renderer: PlainRenderer,
    reader: PlainReader | TerminalReader | None = None,
) -> None:
    """Send one message and print the turn; Ctrl-C stops the turn and keeps its text.

    With a ``reader``, tool calls that await human approval are asked about (y/n) and the turn
    continues after each round of decisions.
    """
    from sa_core.store.clock import now_us

    started = now_us()
    async with runtime.events.subscribe(thread.thread_id) as frames:
        await thread.send_message(text, wait=False)
        stopped = await _follow(runtime, thread, frames, renderer)
        while not stopped and reader is not None and await ask_approvals(thread, reader, renderer):
            stopped = await _follow(runtime, thread, frames, renderer)
    renderer.close_answer()
    if stopped:
        renderer.note(
            "stopped (Ctrl-C): what was said so far is kept; send a message to continue",
            style="yellow",
        )
    await report_failures(thread, started, renderer)
    renderer.flush()


async def _follow(
    runtime: Runtime,
    thread: ThreadState,
    frames: asyncio.Queue[Delivered],
    renderer: PlainRenderer,
) -> bool:
    """Print the thread's frames until its runner is done; whether Ctrl-C stopped the turn."""
    interrupted = asyncio.Event()
    stopped = False
    printer = asyncio.create_task(_print_frames(frames, renderer))
    with on_sigint(interrupted.set):
        turn = asyncio.ensure_future(runtime.scheduler.wait(thread.thread_id))
        stop = asyncio.ensure_future(interrupted.wait())
        await asyncio.wait({turn, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not turn.done():
            stopped = True
            await thread.stop()
            await turn
    await asyncio.sleep(0)
    printer.cancel()
    await asyncio.gather(printer, return_exceptions=True)
    while not frames.empty():
        renderer.frame(frames.get_nowait())
    return stopped


async def ask_approvals(
    thread: ThreadState, reader: PlainReader | TerminalReader, renderer: PlainRenderer
) -> bool:
    """Ask y/n for each tool call awaiting approval; returns whether any was decided."""
    import json

    pending = [p for p in await thread.pending_approvals() if p["status"] == "pending"]
    if pending:
        renderer.close_answer()
        renderer.flush()
    for item in pending:
        arguments = json.dumps(item["arguments"], ensure_ascii=False)
        answer = await reader.ask(f"\n  approve {item['name']}({arguments})? [y/N] ")
        if isinstance(answer, str) and answer.strip().lower() in ("y", "yes"):
            await thread.approve(item["tool_call_id"])
        else:
            await thread.deny(item["tool_call_id"], "Denied at the terminal by the user.")
    return bool(pending)


async def _print_frames(frames: asyncio.Queue[Delivered], renderer: PlainRenderer) -> None:
    while True:
        renderer.frame(await frames.get())


async def report_failures(thread: ThreadState, since: int, renderer: PlainRenderer) -> None:
    """Print why the turn that started at ``since`` failed, if it did.

    A failed turn stores no answer; its ``step_error`` log says what ended it and the model
    calls' ``llm_call`` logs say why each attempt failed (a missing key, a refused request).
    """
    logs = [log for log in await thread.get_logs(limit=100) if log.created_at >= since]
    failures = [log for log in logs if log.type == "step_error" and not log.data.get("depth")]
    if not failures:
        return
    out = renderer.out
    for failure in reversed(failures):
        out.write(f"\nerror: the turn failed: {failure.data.get('error')}")
    attempts = [log for log in logs if log.type == "llm_call" and log.data.get("error")]
    causes = list(dict.fromkeys(str(log.data["error"]) for log in reversed(attempts)))
    for cause in causes:
        out.write(f"\n  model call: {cause}")
    if any(log.data.get("error_type") == "auth_error" for log in attempts):
        out.write("\n  (--test-provider answers every model offline, without keys)")
    out.flush()
