"""The standard-agents exception tree.

Every error the framework raises derives from :class:`SAError`, and every message says what to
do next::

    SAError
    ├── ConfigurationError            bad definitions, plugins or packs
    │   ├── PackValidationError       .problems lists every problem found at once
    │   ├── DefinitionNotFoundError   unknown agent / prompt / model / tool / effect name
    │   ├── DuplicateNameError        two plugins or packs registered the same name
    │   ├── PluginLoadError           an entry point failed to import
    │   ├── PackLoadError             a pack failed to import or validate
    │   ├── MissingVariablesError     required variables are missing (.missing)
    │   ├── VariableNotFoundError     state.env(name) found no value (also a KeyError)
    │   ├── ScheduleDefinitionError   a schedule's cron / every / time zone is wrong (.problems)
    │   └── ScriptFileError           an offline script file is missing or malformed
    ├── ProviderError                 a model call failed (.code, .status, .retry_after)
    │   ├── MissingKeyError           the provider's key variable is unset (.variable)
    │   └── ScriptExhaustedError      a TestProvider ran out of scripted responses
    ├── ToolError                     a tool failed outside a model turn (invoke_tool)
    ├── ApprovalError                 a tool call's approval cannot be decided
    │   ├── ApprovalNotFoundError     no pending approval with this tool call id
    │   ├── ApprovalConflictError     the call was already decided
    │   └── ApprovalArgumentsError    edited arguments do not fit the tool (.problems)
    ├── ClientToolsError              a message's client tools or tool_choice are invalid
    │                                 (.problems: (field, message) pairs, every one at once)
    ├── ClientToolResultsError        tool results that answer no pending client call
    ├── EffectError                   an effect is unknown or failed
    ├── StoreError                    a pack store call got a bad namespace, key, value or ttl
    ├── ScheduleError                 a schedule cannot be found or created
    │   ├── ScheduleNotFoundError     no schedule of this name in the package
    │   └── ScheduleExistsError       a schedule of this name exists already
    ├── EndpointError                 a pack endpoint's error answer (.status, .error, .detail)
    ├── FileSystemError               a thread file operation failed
    ├── PackagingError                packing, unpacking, building or publishing failed
    └── ThreadError                   thread lifecycle problems
        ├── ThreadNotFoundError
        ├── ThreadTerminatedError
        ├── NoParentThreadError       notify_parent / set_status on a top-level thread
        ├── ThreadBusyError           a rewind while a turn runs (HTTP 409)
        ├── CutPointError             a fork or rewind at a message that is no quiescent point
        ├── SharedHistoryError        a change to messages a fork shares
        └── ThreadDocumentError       an exported thread cannot be imported (.problems)
            └── ReplayUnavailableError  its model calls were not recorded (.unrecorded)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

ProviderErrorCode = Literal[
    "rate_limit", "auth_error", "invalid_request", "server_error", "timeout", "unknown"
]

RETRYABLE_CODES: frozenset[str] = frozenset({"rate_limit", "server_error", "timeout", "unknown"})


class SAError(Exception):
    """Base class of every standard-agents error."""


class ConfigurationError(SAError):
    """A definition, plugin or pack is wrong; fix the configuration and retry."""


class PackValidationError(ConfigurationError):
    """A pack's definition graph has problems. ``problems`` lists all of them."""

    def __init__(self, pack_name: str, problems: Sequence[str]) -> None:
        self.pack_name = pack_name
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"Pack '{pack_name}' has {len(self.problems)} problem(s):\n{lines}")


class DefinitionNotFoundError(ConfigurationError):
    """A name does not resolve to a definition.

    The message reads ``Unknown <kind> '<name>' in package '<package>'. <hint> Known <kind>s:
    ...``, each part present only when given.
    """

    def __init__(
        self,
        kind: str,
        name: str,
        known: Iterable[str] = (),
        *,
        package: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.kind = kind
        self.name = name
        self.package = package
        self.hint = hint
        known_list = sorted(known)
        where = f" in package '{package}'" if package else ""
        parts = [f"Unknown {kind} '{name}'{where}."]
        if hint:
            parts.append(hint)
        if known_list:
            parts.append(f"Known {kind}s: {', '.join(known_list)}.")
        super().__init__(" ".join(parts))


class DuplicateNameError(ConfigurationError):
    """Two sources registered the same name."""


class PluginLoadError(ConfigurationError):
    """A plugin entry point could not be loaded."""


class PackLoadError(ConfigurationError):
    """A pack entry point could not be loaded or did not validate."""

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"Pack from {source} could not be loaded: {reason}")


class MissingVariablesError(ConfigurationError):
    """Variables declared ``required`` have no value.

    ``missing`` holds ``(variable, declared_by)`` pairs, for example
    ``("WEATHER_KEY", "tool 'weather'")``.
    """

    def __init__(self, agent: str, missing: Sequence[tuple[str, str]]) -> None:
        self.agent = agent
        self.missing = list(missing)
        lines = "\n".join(f"  - {name} (declared by {who})" for name, who in self.missing)
        super().__init__(
            f"Agent '{agent}' needs {len(self.missing)} variable(s) that have no value:\n{lines}\n"
            "Pass them in env=..., set them on the runtime, or give the definition a default."
        )

    @property
    def names(self) -> list[str]:
        """The missing variable names, without duplicates, in order."""
        return list(dict.fromkeys(name for name, _ in self.missing))


class ProviderError(SAError):
    """A model call failed.

    Attributes:
        code: one of ``rate_limit``, ``auth_error``, ``invalid_request``, ``server_error``,
            ``timeout``, ``unknown``.
        status: the HTTP status, when there was one.
        retry_after: seconds the provider asked us to wait, when it said.
    """

    def __init__(
        self,
        message: str,
        code: str = "unknown",
        status: int | None = None,
        *,
        retry_after: float | None = None,
        provider: str | None = None,
    ) -> None:
        self.code = code
        self.status = status
        self.retry_after = retry_after
        self.provider = provider
        super().__init__(message)

    @property
    def retryable(self) -> bool:
        """Whether retrying the same request may succeed."""
        return self.code in RETRYABLE_CODES


class MissingKeyError(ProviderError):
    """The provider's API key variable has no value."""

    def __init__(self, provider: str, variable: str) -> None:
        self.variable = variable
        super().__init__(
            f"Provider '{provider}' needs the variable {variable}: set it in the environment, "
            f"in the runtime's env, or in the thread's env.",
            code="auth_error",
            provider=provider,
        )


class ScriptExhaustedError(ProviderError):
    """A ``TestProvider`` was asked for more responses than its script holds."""


class ToolError(SAError):
    """A tool could not run."""


class ApprovalError(SAError):
    """An approval request that cannot be decided."""


class ApprovalNotFoundError(ApprovalError):
    """No pending approval with this tool call id on the thread."""


class ApprovalConflictError(ApprovalError):
    """The call was already decided."""


class ApprovalArgumentsError(ApprovalError):
    """Edited arguments do not match the tool's arguments."""

    def __init__(self, tool: str, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            f"Edited arguments for tool '{tool}' are invalid: {'; '.join(problems)}. Send "
            f"arguments that match the tool's schema, or omit them to run the call as the model "
            f"made it."
        )


class ClientToolsError(SAError, ValueError):
    """A message's client tools (or its ``tool_choice``) cannot be offered for its turn.

    Attributes:
        problems: ``(field, message)`` pairs, every problem found: ``field`` is
            ``client_tools``, ``client_tools[<index>]``, ``client_tools[<index>].<key>`` or
            ``tool_choice``.
    """

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems = list(problems)
        listed = "; ".join(f"{field}: {message}" for field, message in self.problems)
        super().__init__(f"Client tools cannot be offered: {listed}")


class ClientToolResultsError(SAError, ValueError):
    """Tool results sent for calls that are not client tool calls awaiting a result.

    Attributes:
        problems: one entry per result that cannot be taken (or why none can).
    """

    def __init__(self, thread_id: str, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            f"Thread {thread_id} cannot take these tool results: {'; '.join(self.problems)}. "
            "Send one result per client tool call the last turn returned "
            "(thread.pending_client_calls() lists them)."
        )


class EffectError(SAError):
    """An effect is unknown or failed."""


class ScheduleDefinitionError(ConfigurationError):
    """A schedule's definition has problems. ``problems`` lists all of them."""

    def __init__(self, schedule: str, problems: Sequence[str]) -> None:
        self.schedule = schedule
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"Schedule '{schedule}' has {len(self.problems)} problem(s):\n{lines}")


class StoreError(SAError):
    """A pack store call got bad arguments; ``problems`` lists every one."""

    def __init__(self, operation: str, problems: Sequence[str]) -> None:
        self.operation = operation
        self.problems = list(problems)
        super().__init__(f"store.{operation}: " + "; ".join(self.problems))


class ScheduleError(SAError):
    """A schedule operation is not possible."""


class ScheduleNotFoundError(ScheduleError):
    """No schedule of this name in the package."""

    def __init__(self, package: str | None, name: str) -> None:
        self.package = package
        self.name = name
        where = f"Package '{package}' has" if package is not None else "No package has"
        super().__init__(
            f"{where} no schedule '{name}'; list the schedules with runtime.schedules.list() "
            f"or GET /api/packages/{{package}}/schedules."
        )


class ScheduleExistsError(ScheduleError):
    """A schedule of this name exists in the package already."""

    def __init__(self, package: str, name: str) -> None:
        self.package = package
        self.name = name
        super().__init__(
            f"Package '{package}' already has a schedule '{name}'; pick another name, or "
            f"delete the schedule first to replace it."
        )


class EndpointError(SAError):
    """Raise from a handler to answer ``{"error": error, "detail": detail}`` with ``status``."""

    def __init__(self, status: int, error: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.error = error
        self.detail = detail


class FileSystemError(SAError):
    """A thread filesystem operation failed (bad path, missing file, not a directory...)."""


class PackagingError(SAError):
    """Packing, unpacking, building or publishing a pack failed; the message says what to do."""


class ThreadError(SAError):
    """A thread operation is not possible."""


class ThreadNotFoundError(ThreadError):
    """No thread has this id."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"Thread {thread_id} does not exist.")


class ThreadTerminatedError(ThreadError):
    """The thread was terminated; it accepts no new messages or work."""

    def __init__(self, thread_id: str, terminated_at: int) -> None:
        self.thread_id = thread_id
        self.terminated_at = terminated_at
        super().__init__(
            f"Thread {thread_id} is terminated (terminated_at={terminated_at}); "
            "create a new thread to continue."
        )


class NoParentThreadError(ThreadError):
    """A child-only operation was called on a thread that has no parent."""

    def __init__(self, thread_id: str, operation: str) -> None:
        self.thread_id = thread_id
        self.operation = operation
        super().__init__(
            f"{operation} needs a parent thread, but thread {thread_id} has none: only a "
            f"subagent (a thread created by a subagent tool or subagent_create) has a parent. "
            f"Check state.parent_id before calling it."
        )


class ThreadBusyError(ThreadError):
    """The thread is running a turn; the operation needs it idle."""

    def __init__(self, thread_id: str, operation: str) -> None:
        self.thread_id = thread_id
        self.operation = operation
        super().__init__(
            f"Cannot {operation} thread {thread_id} while a turn runs on it; wait until it is "
            "idle (runtime.wait_idle()) or stop it first (thread.stop())."
        )


class CutPointError(ThreadError):
    """A fork or rewind names a message that is not a point the thread can be cut at."""

    def __init__(self, thread_id: str, message_id: str | None, reason: str) -> None:
        self.thread_id = thread_id
        self.message_id = message_id
        self.reason = reason
        super().__init__(
            f"Cannot cut thread {thread_id} at message {message_id}: {reason} A cut must be "
            "at a user message, an answer without tool calls, or the last result of a tool "
            "round, in the thread's history."
        )


class SharedHistoryError(ThreadError):
    """A change would alter history that a fork shares with its source."""

    def __init__(self, thread_id: str, detail: str) -> None:
        self.thread_id = thread_id
        super().__init__(
            f"{detail} Forks share their source's history as it was at the cut, so neither "
            "side may change it: fork at an earlier message and continue there instead (or "
            "delete the forks first)."
        )


class ThreadDocumentError(ThreadError):
    """An exported thread (``sa-thread/1``) cannot be imported or replayed here.

    ``problems`` lists every problem at once (an unknown format, agents this runtime lacks).
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"The thread document cannot be used here:\n{lines}")


class ReplayUnavailableError(ThreadDocumentError):
    """A thread cannot be replayed: some of its model answers were not recorded.

    ``unrecorded`` lists ``(thread path, count)`` of the model calls without a recording.
    """

    def __init__(self, unrecorded: Sequence[tuple[str, int]]) -> None:
        self.unrecorded = list(unrecorded)
        where = ", ".join(f"{path}: {count}" for path, count in self.unrecorded)
        super().__init__(
            [
                f"model calls were not recorded ({where}), so the replay cannot answer them; "
                "recording was off for them (sa serve --no-record or "
                "STANDARD_AGENTS_RECORD_MODEL_CALLS=0 turn it off, and "
                "define_model(..., record=False) keeps a model out). "
                "Turn recording on and run the thread again to replay it."
            ]
        )


class VariableNotFoundError(ConfigurationError, KeyError):
    """``state.env(name)`` found no value in any source."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"Environment variable not found: {name}. Set it on the thread (env=...), the "
            "runtime, the agent or the prompt."
        )

    def __str__(self) -> str:
        return str(self.args[0])


class ScriptFileError(ConfigurationError):
    """An offline script file is missing, unreadable or malformed."""
