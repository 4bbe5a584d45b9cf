"""A test-only plugin for the console's browser tests: a pack and an offline scripted model.

``sa serve`` loads it through the ``sa`` entry point that the ``sa_console_kit-0.1.0.dist-info``
folder next to this file declares, when this folder is on ``PYTHONPATH``. The model answers from
the conversation, so every run is the same:

- a user message containing ``tools`` makes the lead call the ``note`` tool and the blocking
  ``scout`` subagent (a ``dual_ai`` child whose judge approves at once); after the tool results
  it answers with a summary;
- a message containing ``vault`` makes it create the ``vault`` subagent, whose tool needs the
  scoped secret ``VAULT_TOKEN``: the call fails with ``subagent_env_required`` until a person
  provides it;
- a message containing ``slow`` is answered after five seconds (messages sent meanwhile queue);
- any other message gets a streamed Markdown echo.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from sa_core import (
    Pack,
    StoreConfig,
    define_agent,
    define_model,
    define_prompt,
    define_schedule,
    define_tool,
)
from sa_core.testing import FunctionProvider
from sa_hooks import hookimpl

PROVIDER = "console_script"


class NoteArgs(BaseModel):
    text: str


class Task(BaseModel):
    task: str
    label: str = ""


class Summary(BaseModel):
    summary: str


async def save_note(state: Any, args: NoteArgs) -> str:
    await state.write_file("/notes/note.md", f"# Note\n\n{args.text}\n", "text/markdown")
    return "Saved /notes/note.md"


def approve(state: Any, args: Summary) -> str:
    return "approved"


def check_keeper(state: Any) -> str:
    return "token set" if state.env("KEEPER_TOKEN") else "no token"


def use_vault(state: Any) -> str:
    return "vault opened" if state.env("VAULT_TOKEN") else "no token"


def _last(request: Any) -> Any:
    return request.messages[-1]


def answer(request: Any) -> Any:
    last = _last(request)
    if request.model == "scout-worker":
        return "I looked around the workspace: nothing unusual."
    if request.model == "vault-worker":
        if last.role == "tool":
            return "The vault is open."
        return {"tool_calls": [{"name": "use_vault", "arguments": {}}]}
    if request.model == "scout-judge":
        return {
            "tool_calls": [
                {"name": "approve", "arguments": {"summary": "Scout report: all quiet."}}
            ]
        }
    if last.role == "tool":
        if "needs variables" in (last.content or ""):
            return "The vault subagent needs a token first."
        return "All done: I saved a **note** and the scout reported back."
    text = last.content or ""
    if "slow" in text:
        return {"content": "Finally done.", "delay": 5.0}
    if "vault" in text:
        return {
            "tool_calls": [
                {
                    "name": "subagent_create",
                    "arguments": {
                        "agent": "vault",
                        "name": "v1",
                        "message": "Open it.",
                        "attachments": [],
                    },
                }
            ]
        }
    if "tools" in text:
        return {
            "content": "Let me use my tools.",
            "reasoning": "The user asked for tools, so I call note and scout.",
            "tool_calls": [
                {"name": "note", "arguments": {"text": "Remember the console test."}},
                {"name": "scout", "arguments": {"task": "Look around.", "label": "first scout"}},
            ],
        }
    return f"You said: **{text}**. This answer streams in small pieces."


provider = FunctionProvider(answer, name=PROVIDER, chunk_size=6, chunk_delay=0.02)

pack = Pack(
    name="console_demo",
    version="1.2.3",
    author="Console Tests",
    license="MIT",
    description="A lead agent with a note tool and a scout subagent, for the console tests.",
    entry_agents=["lead", "keeper"],
    models=[
        define_model(
            name="lead_model", provider=PROVIDER, model="lead-1", input_price=1.0, output_price=2.0
        ),
        define_model(name="worker_model", provider=PROVIDER, model="scout-worker"),
        define_model(name="judge_model", provider=PROVIDER, model="scout-judge"),
        define_model(name="vault_model", provider=PROVIDER, model="vault-worker"),
        define_model(name="embed_model", provider=PROVIDER, model="hash-embed", kind="embedding"),
    ],
    store=StoreConfig(embedding_model="embed_model"),
    tools=[
        define_tool(
            name="note",
            description="Save a note to /notes/note.md.",
            args=NoteArgs,
            execute=save_note,
        ),
        define_tool(
            name="approve", description="Approve the scout's work.", args=Summary, execute=approve
        ),
        define_tool(
            name="check_keeper",
            description="Check the keeper's token.",
            execute=check_keeper,
            variables=[
                {"name": "KEEPER_TOKEN", "type": "secret", "required": True},
                {"name": "KEEPER_REGION", "type": "text", "description": "Where the keeper works."},
            ],
        ),
        define_tool(
            name="use_vault",
            description="Open the vault.",
            execute=use_vault,
            variables=[{"name": "VAULT_TOKEN", "type": "secret", "required": True, "scoped": True}],
        ),
    ],
    prompts=[
        define_prompt(
            name="lead_main",
            model="lead_model",
            prompt="Help the user.",
            include_chat=True,
            tools=[
                "note",
                {
                    "name": "scout",
                    "blocking": True,
                    "initUserMessageProperty": "task",
                    "initAgentNameProperty": "label",
                },
                {"name": "vault", "blocking": False, "resumable": {"receives_messages": "side_a"}},
            ],
        ),
        define_prompt(
            name="scout_worker",
            model="worker_model",
            prompt="Scout.",
            include_chat=True,
            required_schema=Task,
        ),
        define_prompt(
            name="keeper_main", model="lead_model", prompt="Keep.", tools=["check_keeper"]
        ),
        define_prompt(
            name="vault_worker",
            model="vault_model",
            prompt="Vault.",
            include_chat=True,
            tools=["use_vault"],
        ),
        define_prompt(
            name="scout_judge",
            model="judge_model",
            prompt="Judge.",
            include_chat=True,
            tools=["approve"],
        ),
    ],
    agents=[
        define_agent(name="lead", title="Lead", side_a={"prompt": "lead_main"}),
        define_agent(name="keeper", title="Keeper", side_a={"prompt": "keeper_main"}),
        define_agent(
            name="scout",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="Scout around.",
            max_session_turns=3,
            side_a={"prompt": "scout_worker", "label": "worker"},
            side_b={
                "prompt": "scout_judge",
                "label": "judge",
                "stop_on_response": False,
                "session_stop": {"name": "approve", "message_property": "summary"},
            },
        ),
        define_agent(
            name="vault",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="Opens the vault.",
            max_session_turns=2,
            side_a={"prompt": "vault_worker"},
            side_b={"prompt": "scout_judge", "stop_on_response": False, "session_stop": "approve"},
        ),
    ],
    schedules=[  # daily from the server's start: never due while the tests run
        define_schedule(
            name="daily_digest",
            agent="lead",
            every="1d",
            message="Write the daily digest.",
            description="The lead writes a digest once a day.",
        ),
    ],
)


@hookimpl
def sa_register_providers(register: Any) -> None:
    register(provider)


@hookimpl
def sa_register_packs(register: Any) -> None:
    register(pack)
