"""What the composition tests share: models, argument types, a research pack and its scripts."""

from __future__ import annotations

from pydantic import BaseModel

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.testing import FunctionProvider

PARENT = define_model(name="parent_model", provider="test", model="parent")
WORKER = define_model(name="worker_model", provider="test", model="worker")
REVIEWER = define_model(name="reviewer_model", provider="test", model="reviewer")
SUB = define_model(name="sub_model", provider="test", model="sub")


class Task(BaseModel):
    task: str
    label: str = ""
    files: list[str] = []


class Summary(BaseModel):
    summary: str
    files: list[str] = []


class Reason(BaseModel):
    reason: str


def ok(state, args):
    return "recorded"


def routed(**queues):
    """A FunctionProvider answering per wire model id from scripted queues (str / dict / callable)."""
    queues = {k: list(v) for k, v in queues.items()}
    seen: dict[str, list] = {k: [] for k in queues}

    def answer(request):
        seen[request.model].append(request)
        queue = queues[request.model]
        if not queue:
            raise AssertionError(f"no scripted answer left for {request.model}")
        item = queue.pop(0)
        return item(request) if callable(item) else item

    provider = FunctionProvider(answer)
    provider.seen = seen
    return provider


def research_pack(subagent_entry, *, parent_prompt_fields=None, extra_tools=(), child_fields=None) -> Pack:
    approve = define_tool(name="approve", description="Approve the research.", args=Summary, execute=ok)
    reject = define_tool(name="reject", description="Reject.", args=Reason, execute=ok)
    status = define_tool(name="report_status", description="Status.", args=Reason, execute=ok)
    coordinator = define_prompt(
        name="coordinator", model="parent_model", prompt="Coordinate.", include_chat=True,
        tools=[subagent_entry, *extra_tools], **(parent_prompt_fields or {}),
    )
    worker = define_prompt(name="worker", model="worker_model", prompt="Research.", include_chat=True, tools=["report_status"], required_schema=Task)
    reviewer = define_prompt(name="reviewer", model="reviewer_model", prompt="Review.", include_chat=True, tools=["approve", "reject"])
    researcher = define_agent(
        name="researcher",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="Researches a topic.",
        max_session_turns=5,
        side_a={"prompt": "worker", "session_status": {"name": "report_status", "message_property": "reason"}},
        side_b={
            "prompt": "reviewer",
            "stop_on_response": False,
            "session_stop": {"name": "approve", "message_property": "summary", "attachments_property": "files"},
            "session_fail": {"name": "reject", "message_property": "reason"},
        },
        **(child_fields or {}),
    )
    lead = define_agent(name="lead", side_a={"prompt": "coordinator"})
    return Pack(
        name="research", agents=[lead, researcher], prompts=[coordinator, worker, reviewer],
        models=[PARENT, WORKER, REVIEWER, SUB], tools=[approve, reject, status],
    )


APPROVE = {"tool_calls": [{"name": "approve", "arguments": {"summary": "Findings: 42"}}]}


def resumable_entry(**resumable):
    return {"name": "researcher", "blocking": False, "resumable": {"receives_messages": "side_a", **resumable}}
