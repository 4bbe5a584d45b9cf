"""How ``sa run`` prints a conversation: plain text, or Markdown on a terminal.

:class:`PlainRenderer` writes plain lines (``you> ``, ``agent> ``, ``  -> tool {...}``,
``  <- tool: result``), so piped output stays scriptable. :class:`RichRenderer` renders answers
as Markdown with ``rich`` (imported only when it is built) while they stream.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from sa_core.engine.events import Delivered, MessageDataFrame
    from sa_core.spec import Message

SHORT = 120
"""Tool arguments and results longer than this many characters are shortened."""


def shorten(text: str, verbose: bool, limit: int = SHORT) -> str:
    """``text`` on one line, cut to ``limit`` characters unless ``verbose``."""
    if verbose:
        return text
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def call_line(name: str, arguments: str, verbose: bool) -> str:
    """``-> name {arguments}`` for a tool call (arguments as compact JSON)."""
    try:
        shown = json.dumps(json.loads(arguments or "{}"), ensure_ascii=False)
    except ValueError:
        shown = arguments
    return f"-> {name} {shorten(shown, verbose)}"


def result_line(data: dict[str, Any], verbose: bool) -> str:
    """``<- name: result`` for a tool result row (``<- name failed: error`` on error)."""
    name = data.get("name") or "tool"
    verb = " failed" if data.get("tool_status") == "error" else ""
    return f"<- {name}{verb}: {shorten(str(data.get('content') or ''), verbose)}"


class PlainRenderer:
    """Prints frames and history as plain text.

    Args:
        out: where to write.
        verbose: show tool arguments and results in full.

    """

    def __init__(self, out: TextIO, *, verbose: bool = False) -> None:
        self.out = out
        self.verbose = verbose
        self._streamed: set[str] = set()
        self._shown: set[str] = set()
        self._open: str | None = None  # the answer being streamed

    # -- the pieces a subclass renders differently -----------------------------------------

    def start_answer(self, message_id: str) -> None:
        """Begin a streamed answer."""
        self.out.write("\nagent> ")

    def answer_chunk(self, chunk: str) -> None:
        """Append streamed text to the open answer."""
        self.out.write(chunk)

    def end_answer(self) -> None:
        """Close the streamed answer (nothing to do in plain text)."""

    def whole_answer(self, text: str) -> None:
        """Print an answer that was not streamed."""
        self.out.write(f"\nagent> {text}")

    def note(self, text: str, style: str = "dim") -> None:
        """Print an indented side line (tool activity, a stop)."""
        self.out.write(f"\n  {text}")

    def history_line(self, who: str, text: str) -> None:
        """Print one line of a resumed thread's history."""
        self.out.write(f"\n{who}: {text}")

    def flush(self) -> None:
        """Flush the output."""
        self.out.flush()

    # -- frames -----------------------------------------------------------------------------

    def frame(self, frame: Delivered) -> None:
        """Print one event frame of the running turn."""
        if frame["type"] == "message_chunk":
            if frame["depth"] == 0 and not frame.get("subagent_id"):
                self._chunk(str(frame["message_id"]), frame["chunk"])
        elif frame["type"] == "message_data":
            child = frame.get("subagent_id")
            self._message(frame, f"[{child[:8]}] " if child else "")
        self.flush()

    def _chunk(self, message_id: str, chunk: str) -> None:
        if message_id not in self._streamed:
            self.close_answer()
            self._streamed.add(message_id)
            self._open = message_id
            self.start_answer(message_id)
        self.answer_chunk(chunk)

    def _message(self, frame: MessageDataFrame, prefix: str) -> None:
        data = frame["data"]
        message_id = frame["message_id"]
        if data.get("status") in ("pending", "failed") or message_id in self._shown:
            return
        role = data.get("role")
        top = not prefix and data.get("depth", 0) == 0
        if role == "assistant":
            self._shown.add(message_id)
            if message_id in self._streamed:
                self.close_answer()
            elif top and data.get("content"):
                self.close_answer()
                self.whole_answer(str(data["content"]))
            for call in data.get("tool_calls") or []:
                function = call.get("function") or {}
                name, arguments = str(function.get("name")), function.get("arguments") or ""
                self.note(prefix + call_line(name, arguments, self.verbose), style="cyan")
        elif role == "tool":
            self._shown.add(message_id)
            self.close_answer()
            self.note(prefix + result_line(data, self.verbose), style="cyan")

    def close_answer(self) -> None:
        """End the answer being streamed, if any."""
        if self._open is not None:
            self._open = None
            self.end_answer()

    # -- history ----------------------------------------------------------------------------

    def history(self, messages: list[Message], total: int) -> None:
        """Print the last messages of a resumed thread."""
        if not messages:
            return
        self.note(f"Last {len(messages)} of {total} messages:", style="bold")
        for message in messages:
            if message.role == "user":
                self.history_line("you", message.content or "")
            elif message.role == "assistant":
                if message.content:
                    stopped = " [stopped]" if (message.metadata or {}).get("stopped") else ""
                    self.history_line("agent", (message.content or "") + stopped)
                for call in message.tool_calls or []:
                    self.note(
                        call_line(call.function.name, call.function.arguments, self.verbose),
                        style="cyan",
                    )
            elif message.role == "tool":
                data = {
                    "name": message.name,
                    "tool_status": message.tool_status,
                    "content": message.content,
                }
                self.note(result_line(data, self.verbose), style="cyan")
        self.out.write("\n")
        self.flush()


class RichRenderer(PlainRenderer):
    """Renders answers as Markdown with ``rich``, live while they stream.

    Args:
        out: the terminal.
        verbose: show tool arguments and results in full.

    """

    def __init__(self, out: TextIO, *, verbose: bool = False) -> None:
        super().__init__(out, verbose=verbose)
        from rich.console import Console

        self.console = Console(file=out, highlight=False)
        self._text = ""
        self._live: Any = None

    def _markdown(self, text: str) -> Any:
        from rich.markdown import Markdown

        return Markdown(text)

    def start_answer(self, message_id: str) -> None:
        """Open a live Markdown view for the streamed answer."""
        from rich.live import Live

        self.console.print("agent>", style="bold green")
        self._text = ""
        self._live = Live(
            self._markdown(""),
            console=self.console,
            auto_refresh=False,
            vertical_overflow="visible",
        )
        self._live.start()

    def answer_chunk(self, chunk: str) -> None:
        """Re-render the answer with the new text."""
        self._text += chunk
        if self._live is not None:
            self._live.update(self._markdown(self._text), refresh=True)

    def end_answer(self) -> None:
        """Stop the live view, leaving the rendered answer on screen."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def whole_answer(self, text: str) -> None:
        """Render an answer that was not streamed."""
        self.console.print("agent>", style="bold green")
        self.console.print(self._markdown(text))

    def note(self, text: str, style: str = "dim") -> None:
        """Print a side line in a colour, without interpreting markup."""
        from rich.text import Text

        self.console.print(Text("  " + text, style=style))

    def history_line(self, who: str, text: str) -> None:
        """Print a history line; answers are rendered as Markdown."""
        from rich.text import Text

        if who == "agent":
            self.console.print(Text(f"{who}:", style="bold green"))
            self.console.print(self._markdown(text))
        else:
            self.console.print(Text(f"{who}: {text}", style="bold"))
