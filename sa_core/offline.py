"""The offline model behind ``sa run|serve --test-provider``: scripted answers and ``/tool``.

``--test-provider`` alone answers ``Test response received.``; ``--test-provider=script.yaml``
answers from a script file, in order, with the vocabulary of :class:`~sa_core.testing.TestScript`
(YAML or JSON)::

    stream: {chunk_size: 4, chunk_delay: 0.05}   # optional: stream slowly, in pieces
    responses:
      - text: Let me check the weather.
        tool_calls:
          - name: weather
            arguments: {city: Paris}
      - text: It is sunny in Paris.
      - error: The model is overloaded.
        status: 529
      - text: Thinking done.
        reasoning: The user wants a summary.
        delay: 1.5

A bare list of entries is a script too. Each entry holds ``text``, ``tool_calls`` (``name``,
``arguments``, optional ``id``), ``reasoning``, ``error`` (with optional ``code``, ``status``,
``retry_after``), ``delay`` (seconds) and ``usage``.

In both modes a user message ``/tool NAME {"arg": 1}`` makes the offline model call tool ``NAME``
with those JSON arguments (``{}`` when omitted); once the tool answered, the model replies with
what it returned. Scripted entries are not consumed by these commands.

Offline answers are logged as provider ``test`` and model ``offline:<model>``, never as the
pack's real provider, and the provider keeps only the last :data:`RECORDED_REQUESTS` requests.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from sa_core.errors import ScriptExhaustedError, ScriptFileError
from sa_core.providers import ProviderRequest, ProviderResponse, Usage
from sa_core.testing import (
    UNSCRIPTED_REPLY,
    ScriptedResponse,
    TestProvider,
    TestScript,
    default_error_code,
)
from sa_core.testing.answers import build_response

OFFLINE_PROVIDER = "test"
"""The provider name offline answers are logged under."""

OFFLINE_MODEL_PREFIX = "offline:"
"""Logged model ids of offline answers are this prefix plus the pack's model id."""

RECORDED_REQUESTS = 20
"""How many recent requests the offline provider keeps (older ones are dropped)."""

TOOL_COMMAND = re.compile(r"^/tool\s+(?P<name>[A-Za-z0-9_.:-]+)\s*(?P<args>.*)$", re.DOTALL)
"""A user message that asks the offline model to call a tool: ``/tool NAME {json}``."""
ATTACHED_NOTE = re.compile(r"(?:\n\[(?:Attached files|Image): [^\n]*\])+$")
"""The lines the context adds after a message's text for its attachments (not arguments)."""

ENTRY_KEYS = frozenset(
    {"text", "tool_calls", "reasoning", "error", "code", "status", "retry_after", "delay", "usage"}
)
STREAM_KEYS = frozenset({"chunk_size", "chunk_delay"})
USAGE_KEYS = frozenset(
    {"prompt_tokens", "completion_tokens", "total_tokens", "reasoning_tokens", "cached_tokens"}
)

OfflineSpec = bool | str | os.PathLike[str] | TestScript
"""What ``Runtime(offline=...)`` accepts: ``True``, a script file, or a :class:`TestScript`."""


# --------------------------------------------------------------------------------------------
# Script files
# --------------------------------------------------------------------------------------------


def load_script(path: str | os.PathLike[str]) -> TestScript:
    """Read a YAML or JSON script file into a :class:`~sa_core.testing.TestScript`.

    Args:
        path: the file; ``.json`` is read as JSON, anything else as YAML (JSON is valid YAML).

    Returns:
        The script, with streaming settings from its ``stream`` section.

    Raises:
        ScriptFileError: the file is missing or malformed; the message names the file, the
            entry (numbered from 1) and what to change.

    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptFileError(
            f"Offline script {file}: cannot read it ({exc.strerror or exc}); pass an existing "
            "YAML or JSON file with --test-provider=FILE."
        ) from None
    data = _parse(file, text)
    if isinstance(data, list):
        data = {"responses": data}
    if not isinstance(data, Mapping):
        raise ScriptFileError(
            f"Offline script {file}: expected a list of responses or a mapping with "
            f"'responses', got {type(data).__name__}."
        )
    unknown = sorted(set(data) - {"responses", "stream"})
    if unknown:
        raise ScriptFileError(
            f"Offline script {file}: unknown top-level key(s) {unknown}; use 'responses' and "
            "optionally 'stream'."
        )
    entries = data.get("responses")
    if not isinstance(entries, list) or not entries:
        raise ScriptFileError(
            f"Offline script {file}: 'responses' must be a non-empty list of entries "
            "(text, tool_calls, error, ...)."
        )
    script = TestScript([_entry(file, number, entry) for number, entry in enumerate(entries, 1)])
    stream = data.get("stream")
    if stream is not None:
        _apply_stream(file, stream, script)
    return script


def _parse(file: Path, text: str) -> Any:
    if file.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScriptFileError(
                f"Offline script {file}: invalid JSON at line {exc.lineno}: {exc.msg}."
            ) from None
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        raise ScriptFileError(
            f"Offline script {file}: reading YAML needs PyYAML (pip install "
            "'standard-agents[chat]'), or write the script as a .json file."
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScriptFileError(f"Offline script {file}: invalid YAML: {exc}") from None


def _entry(file: Path, number: int, entry: Any) -> ScriptedResponse:
    where = f"Offline script {file}, response {number}"
    if isinstance(entry, str):
        return ScriptedResponse(content=entry, finish_reason="stop")
    if not isinstance(entry, Mapping):
        raise ScriptFileError(
            f"{where}: expected a mapping (text, tool_calls, error, ...) or a string, got "
            f"{type(entry).__name__}."
        )
    unknown = sorted(set(entry) - ENTRY_KEYS)
    if unknown:
        raise ScriptFileError(f"{where}: unknown key(s) {unknown}; use {sorted(ENTRY_KEYS)}.")
    delay = _number(where, "delay", entry.get("delay"))
    if "error" in entry:
        extra = sorted(set(entry) & {"text", "tool_calls", "reasoning", "usage"})
        if extra:
            raise ScriptFileError(f"{where}: an error response cannot also have {extra}.")
        return _error_entry(where, entry, delay)
    text = _text(where, "text", entry.get("text"))
    reasoning = _text(where, "reasoning", entry.get("reasoning"))
    calls = _tool_calls(where, entry.get("tool_calls"))
    if text is None and not calls:
        raise ScriptFileError(f"{where}: give 'text', 'tool_calls' or 'error'.")
    return ScriptedResponse(
        content=text,
        tool_calls=list(calls),
        reasoning=reasoning,
        finish_reason="tool_calls" if calls else "stop",
        usage=_usage(where, entry.get("usage")),
        delay=delay,
    )


def _error_entry(where: str, entry: Mapping[str, Any], delay: float | None) -> ScriptedResponse:
    message = _text(where, "error", entry["error"])
    status = entry.get("status")
    if status is not None and (not isinstance(status, int) or isinstance(status, bool)):
        raise ScriptFileError(f"{where}: 'status' must be an HTTP status number, got {status!r}.")
    code = entry.get("code")
    if code is not None and not isinstance(code, str):
        raise ScriptFileError(f"{where}: 'code' must be a string such as 'rate_limit'.")
    error: dict[str, Any] = {
        "message": message or "Scripted provider error",
        "code": code or default_error_code(status),
        "status": status,
    }
    retry_after = _number(where, "retry_after", entry.get("retry_after"))
    if retry_after is not None:
        error["retry_after"] = retry_after
    return ScriptedResponse(error=error, finish_reason="error", delay=delay)


def _text(where: str, key: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ScriptFileError(f"{where}: '{key}' must be a string, got {type(value).__name__}.")


def _number(where: str, key: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ScriptFileError(f"{where}: '{key}' must be a number of seconds >= 0, got {value!r}.")
    return float(value)


def _tool_calls(where: str, value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ScriptFileError(f"{where}: 'tool_calls' must be a list of {{name, arguments}}.")
    calls = []
    for index, call in enumerate(value, 1):
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise ScriptFileError(f"{where}, tool call {index}: needs a 'name' string.")
        unknown = sorted(set(call) - {"name", "arguments", "id"})
        if unknown:
            raise ScriptFileError(
                f"{where}, tool call {index}: unknown key(s) {unknown}; use name, arguments, id."
            )
        arguments = call.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise ScriptFileError(
                f"{where}, tool call {index} ({call['name']}): 'arguments' must be a mapping."
            )
        spec: dict[str, Any] = {"name": call["name"], "arguments": dict(arguments)}
        if call.get("id") is not None:
            spec["id"] = str(call["id"])
        calls.append(spec)
    return calls


def _usage(where: str, value: Any) -> Usage | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) - USAGE_KEYS:
        raise ScriptFileError(f"{where}: 'usage' must be a mapping of {sorted(USAGE_KEYS)}.")
    return Usage(**{key: int(number) for key, number in value.items()})


def _apply_stream(file: Path, stream: Any, script: TestScript) -> None:
    where = f"Offline script {file}, 'stream'"
    if not isinstance(stream, Mapping) or set(stream) - STREAM_KEYS:
        raise ScriptFileError(f"{where}: expected a mapping of chunk_size and chunk_delay.")
    size = stream.get("chunk_size", 1)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ScriptFileError(f"{where}: 'chunk_size' must be a whole number >= 1, got {size!r}.")
    delay = _number(where, "chunk_delay", stream.get("chunk_delay")) or 0.0
    script.with_streaming_simulation(size, delay)


# --------------------------------------------------------------------------------------------
# The provider
# --------------------------------------------------------------------------------------------


class OfflineProvider(TestProvider):
    """The test provider of offline runs: scripted or unscripted, with ``/tool`` commands.

    Args:
        script: the answers, or ``None`` to answer ``Test response received.`` forever.
        source: where the script came from (named in errors), e.g. the file path.
        keep: how many recent requests to keep in :attr:`requests`.

    """

    __test__: ClassVar[bool] = False

    def __init__(
        self,
        script: TestScript | None = None,
        *,
        source: str | None = None,
        keep: int = RECORDED_REQUESTS,
    ) -> None:
        super().__init__(script, name=OFFLINE_PROVIDER)
        self.source = source
        self.keep = max(keep, 1)

    async def _answer(self, request: ProviderRequest) -> tuple[ProviderResponse, int | None, float]:
        try:
            command = tool_command_answer(request)
            if command is None:
                return await super()._answer(request)
            self.requests.append(request)
            script = self.script
            chunk_size = script.chunk_size if script is not None else None
            chunk_delay = script.chunk_delay if script is not None else 0.0
            return build_response(command, request), chunk_size, chunk_delay
        except ScriptExhaustedError as exc:
            if self.source is None:
                raise
            size = len(self.script) if self.script is not None else 0
            raise ScriptExhaustedError(
                f"Offline script {self.source}: all {size} responses were used; add entries to "
                f"the file and restart, or type '/tool NAME {{json}}' to call a tool.",
                "invalid_request",
                provider=self.name,
            ) from exc
        finally:
            if len(self.requests) > self.keep:
                del self.requests[: len(self.requests) - self.keep]


def tool_command_answer(request: ProviderRequest) -> ScriptedResponse | None:
    """The offline answer to a ``/tool`` command, or ``None`` when the request holds none.

    The last user message ``/tool NAME {json}`` (with nothing after it) becomes a call of tool
    ``NAME``; once the tool results of that call follow, the answer reports them.

    Args:
        request: the model call.

    Returns:
        A tool call, a report of the tool results, a text explaining a bad command, or ``None``.

    """
    messages = request.messages
    end = len(messages)
    while end > 0 and messages[end - 1].role == "tool":
        end -= 1
    results = messages[end:]
    if results:
        if end < 2 or not messages[end - 1].tool_calls:
            return None
        asking = messages[end - 2]
        if asking.role != "user" or not TOOL_COMMAND.match((asking.content or "").strip()):
            return None
        lines = [f"{m.tool_name or 'tool'} returned: {m.content or ''}" for m in results]
        return ScriptedResponse(content="\n".join(lines), finish_reason="stop")
    last = messages[-1] if messages else None
    if last is None or last.role != "user":
        return None
    match = TOOL_COMMAND.match(ATTACHED_NOTE.sub("", (last.content or "").strip()))
    if match is None:
        return None
    name, raw = match["name"], match["args"].strip() or "{}"
    offered = [tool.name for tool in request.tools]
    if name not in offered:
        listing = ", ".join(offered) or "none"
        return ScriptedResponse(
            content=f"(offline) No tool '{name}' is offered here. Offered tools: {listing}.",
            finish_reason="stop",
        )
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError as exc:
        arguments = exc
    if not isinstance(arguments, dict):
        return ScriptedResponse(
            content=f"(offline) The arguments of /tool {name} must be a JSON object, e.g. "
            f'/tool {name} {{"key": "value"}}; got {raw}',
            finish_reason="stop",
        )
    return ScriptedResponse(
        tool_calls=[{"name": name, "arguments": arguments}], finish_reason="tool_calls"
    )


def offline_provider(spec: OfflineSpec) -> OfflineProvider:
    """Build the offline provider ``Runtime(offline=spec)`` answers every model with.

    Args:
        spec: ``True`` (unscripted), a script file path, or a :class:`TestScript`.

    Returns:
        The provider.

    Raises:
        ScriptFileError: the script file is missing or malformed.

    """
    if isinstance(spec, TestScript):
        return OfflineProvider(spec.clone())
    if isinstance(spec, bool):
        return OfflineProvider()
    return OfflineProvider(load_script(spec), source=os.fspath(spec))


def offline_model(model: str) -> str:
    """The model id offline answers are logged under: ``offline:<model>``."""
    return f"{OFFLINE_MODEL_PREFIX}{model}"


__all__ = [
    "OFFLINE_MODEL_PREFIX",
    "OFFLINE_PROVIDER",
    "RECORDED_REQUESTS",
    "TOOL_COMMAND",
    "UNSCRIPTED_REPLY",
    "OfflineProvider",
    "OfflineSpec",
    "ScriptFileError",
    "load_script",
    "offline_model",
    "offline_provider",
    "tool_command_answer",
]
