"""The reminders pack: reminders as durable scheduled effects, and an endpoint listing them.

* ``set_reminder(text, minutes)`` schedules the ``remind`` effect with
  ``state.schedule_effect("remind", {...}, delay=minutes * 60)``. Scheduled effects are stored in
  the database, so a reminder still fires when the process restarts before it is due.
* The ``remind`` effect stores the reminder as an assistant message in the thread
  (``state.inject_message``: no model call, no turn) and emits a ``reminder`` event to live
  subscribers.
* ``GET /api/packages/reminders/threads/{id}/reminders`` (a thread endpoint) lists the pending
  reminders of a thread.

Importing this module does no I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from sa_core import (
    Pack,
    define_agent,
    define_effect,
    define_model,
    define_prompt,
    define_thread_endpoint,
    define_tool,
)

if TYPE_CHECKING:
    from sa_core import ScheduledEffect, ThreadState

__version__ = "0.1.0"

EFFECT = "remind"
"""The effect a reminder is."""

MAX_MINUTES = 60 * 24 * 30
"""Reminders can be set at most 30 days ahead."""

_METADATA: dict[str, Any] = {
    "package_name": "sa-pack-reminders",
    "version": __version__,
    "author": "standard-agents contributors",
    "license": "Apache-2.0",
}


def _iso(microseconds: int) -> str:
    return datetime.fromtimestamp(microseconds / 1_000_000, UTC).isoformat(timespec="seconds")


def describe(effect: ScheduledEffect) -> dict[str, Any]:
    """The public shape of a pending reminder.

    Args:
        effect: a pending ``remind`` effect.

    Returns:
        ``{id, text, due_at}`` with ``due_at`` in ISO 8601, UTC.
    """
    return {
        "id": effect.id,
        "text": effect.args.get("text", ""),
        "due_at": _iso(effect.scheduled_at),
    }


async def pending_reminders(state: ThreadState) -> list[dict[str, Any]]:
    """The thread's pending reminders, soonest first.

    Args:
        state: the thread.

    Returns:
        One :func:`describe` dict per pending reminder.
    """
    effects = await state.get_scheduled_effects(EFFECT)
    return [describe(e) for e in sorted(effects, key=lambda e: e.scheduled_at)]


# ---------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------


class SetReminderArgs(BaseModel):
    """Arguments of ``set_reminder``."""

    text: str = Field(min_length=1, description="What to remind the user of.")
    minutes: float = Field(gt=0, le=MAX_MINUTES, description="How many minutes from now.")


class CancelArgs(BaseModel):
    """Arguments of ``cancel_reminder``."""

    reminder_id: str = Field(description="The id list_reminders shows.")


class RemindArgs(BaseModel):
    """Arguments of the ``remind`` effect."""

    text: str


async def set_reminder(state: ThreadState, args: SetReminderArgs) -> str:
    """Schedule a reminder.

    Args:
        state: the thread.
        args: text and delay in minutes.

    Returns:
        A confirmation with the reminder's id and due time.
    """
    reminder_id = await state.schedule_effect(EFFECT, {"text": args.text}, delay=args.minutes * 60)
    due = next(e for e in await state.get_scheduled_effects(EFFECT) if e.id == reminder_id)
    return f"Reminder {reminder_id} set for {_iso(due.scheduled_at)}: {args.text}"


async def list_reminders(state: ThreadState) -> str:
    """List the pending reminders.

    Args:
        state: the thread.

    Returns:
        One ``id  due_at  text`` line per reminder, or a note that there are none.
    """
    reminders = await pending_reminders(state)
    if not reminders:
        return "No pending reminders."
    return "\n".join(f"{r['id']}  {r['due_at']}  {r['text']}" for r in reminders)


async def cancel_reminder(state: ThreadState, args: CancelArgs) -> str:
    """Cancel a pending reminder.

    Args:
        state: the thread.
        args: the reminder's id.

    Returns:
        A confirmation.

    Raises:
        LookupError: no pending reminder has that id.
    """
    if not await state.remove_scheduled_effect(args.reminder_id):
        raise LookupError(f"No pending reminder {args.reminder_id}; see list_reminders.")
    return f"Reminder {args.reminder_id} cancelled."


tools = [
    define_tool(
        name="set_reminder",
        description="Remind the user of something in N minutes (fractions allowed).",
        args=SetReminderArgs,
        execute=set_reminder,
    ),
    define_tool(
        name="list_reminders",
        description="List the pending reminders with their ids.",
        execute=list_reminders,
    ),
    define_tool(
        name="cancel_reminder",
        description="Cancel a pending reminder by id.",
        args=CancelArgs,
        execute=cancel_reminder,
    ),
]

# ---------------------------------------------------------------------------------------------
# The effect and the endpoint
# ---------------------------------------------------------------------------------------------


async def remind(state: ThreadState, args: RemindArgs) -> None:
    """Deliver a reminder: store it as an assistant message and tell live subscribers.

    Args:
        state: the thread (no execution: effects run outside turns).
        args: the reminder text.
    """
    run = state.context.get("scheduled_effect") or {}
    await state.inject_message(
        {
            "role": "assistant",
            "content": f"Reminder: {args.text}",
            "metadata": {"reminder_id": run.get("id"), "kind": "reminder"},
        }
    )
    state.emit("reminder", {"id": run.get("id"), "text": args.text})


async def reminders_endpoint(request: Any, state: ThreadState) -> dict[str, Any]:
    """``GET .../threads/{id}/reminders``: the pending reminders of the thread.

    Args:
        request: the endpoint request (unused).
        state: the thread.

    Returns:
        ``{"thread_id": ..., "reminders": [{id, text, due_at}, ...]}``.
    """
    return {"thread_id": state.thread_id, "reminders": await pending_reminders(state)}


effects = [
    define_effect(
        name=EFFECT,
        description="Deliver a reminder into the thread.",
        args=RemindArgs,
        execute=remind,
    )
]

endpoints = [
    define_thread_endpoint(
        path="reminders",
        method="GET",
        handler=reminders_endpoint,
        description="The thread's pending reminders.",
    )
]

# ---------------------------------------------------------------------------------------------
# Prompt and agent
# ---------------------------------------------------------------------------------------------

ASSISTANT_PROMPT = """\
You are a reminder assistant. When the user asks to be reminded of something, call
set_reminder with a short reminder text and the delay in minutes (convert hours and days).
Use list_reminders to show what is pending and cancel_reminder to cancel one. Reminders are
delivered into this conversation when they are due; confirm the due time in one sentence."""

models = [define_model(name="fast", provider="openai", model="gpt-4o-mini")]

prompts = [
    define_prompt(
        name="reminder_main",
        model="fast",
        prompt=ASSISTANT_PROMPT,
        include_chat=True,
        tools=["set_reminder", "list_reminders", "cancel_reminder"],
    )
]

reminder_assistant = define_agent(
    name="reminder_assistant",
    title="Reminders",
    description="Sets, lists and cancels reminders that arrive in the conversation when due.",
    side_a={"prompt": "reminder_main"},
    **_METADATA,
)

pack = Pack(
    name="reminders",
    agents=[reminder_assistant],
    prompts=prompts,
    models=models,
    tools=tools,
    effects=effects,
    endpoints=endpoints,
    version=__version__,
    author="standard-agents contributors",
    license="Apache-2.0",
    description="Reminders as durable scheduled effects, with a thread endpoint listing them.",
)

__all__ = ["EFFECT", "pack", "pending_reminders", "reminder_assistant", "reminders_endpoint"]
