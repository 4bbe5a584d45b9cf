"""Remote subagents against an A2A agent built from the a2a-sdk's server classes alone.

The parent runs in an in-process runtime (SQLite) with a scripted model; the remote agent is
:class:`a2a_sdk_agent.SdkAgent` on loopback. Each test drives the parent through its public
API and checks what the parent, the child thread and the remote saw.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("a2a.server")

from a2a_sdk_agent import SdkAgent  # noqa: E402

from sa_core import (  # noqa: E402
    Pack,
    define_agent,
    define_model,
    define_prompt,
    define_remote_agent,
)
from sa_core.testing import FunctionProvider  # noqa: E402

pytestmark = pytest.mark.asyncio
MODEL = define_model(name="m", provider="test", model="boss")


def calls(*items: Any) -> FunctionProvider:
    """The parent's model: each item is a tool call (name, args), a text or a function of the
    request, in order."""
    queue = list(items)
    seen: list[Any] = []

    def answer(request: Any) -> Any:
        seen.append(request)
        item = queue.pop(0) if queue else "done"
        if callable(item):
            return item(request)
        if isinstance(item, tuple):
            name, args = item
            return {"tool_calls": [{"name": name, "arguments": args}]}
        return item

    provider = FunctionProvider(answer)
    provider.seen = seen  # type: ignore[attr-defined]
    return provider


def pack_for(agent: SdkAgent, entry: Any, **remote: Any) -> Pack:
    helper = define_remote_agent(name="helper", url=agent.base, **remote)
    main = define_prompt(name="main", model="m", prompt="Boss.", include_chat=True, tools=[entry])
    boss = define_agent(name="boss", side_a={"prompt": "main"})
    return Pack(name="desk", agents=[boss], prompts=[main], models=[MODEL], remote_agents=[helper])


def tool_results(messages: Any) -> list[str]:
    return [m.content for m in messages if m.role == "tool"]


async def test_blocking_call_returns_the_remote_answer_and_mirrors_the_exchange(
    sa_runtime_factory: Any,
) -> None:
    with SdkAgent() as agent:
        pack = pack_for(agent, {"name": "helper", "blocking": True})
        provider = calls(("helper", {"message": "echo: hello there"}), "ok")
        async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
            thread = await rt.create_thread("boss")
            await thread.send_message("go")
            await rt.wait_idle()
            messages = (await thread.get_messages()).messages
            [entry] = thread.children
            child = await rt.get_thread(entry.reference)
            child_messages = (await child.get_messages()).messages
            usage = await thread.usage()
    [result] = tool_results(messages)
    assert usage.tree is not None
    remote_usage = usage.tree.by_model["a2a:helper"]
    assert (remote_usage.input_tokens, remote_usage.output_tokens) == (12, 5)
    assert remote_usage.cost_usd == 0.25
    assert result == f"hello there\n\nReference: {entry.reference}"
    assert entry.name == "helper" and entry.status == "terminated"
    assert [(m.role, m.content, m.metadata.get("a2a", {}).get("kind")) for m in child_messages] == [
        ("user", "echo: hello there", None),
        ("assistant", "thinking it over", "status"),
        ("assistant", "hello there", "answer"),
    ]
    assert [text for _, _, text in agent.messages] == ["echo: hello there"]
    [offered] = [t for t in provider.seen[0].tools if t.name == "helper"]
    assert offered.description.startswith("SDK helper: An agent made with the a2a-sdk alone.")
    assert "Echo (Says it back.)" in offered.description


async def test_remote_files_and_data_come_back_as_attachments_and_output(
    sa_runtime_factory: Any,
) -> None:
    with SdkAgent() as agent:
        pack = pack_for(agent, {"name": "helper", "blocking": True})
        provider = calls(("helper", {"message": "file"}), "ok")
        async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
            thread = await rt.create_thread("boss")
            await thread.send_message("go")
            await rt.wait_idle()
            messages = (await thread.get_messages()).messages
            [tool] = [m for m in messages if m.role == "tool"]
            [ref] = tool.attachments
            copied = await thread.read_file(ref.path)
            child = await rt.get_thread(thread.children[0].reference)
            answer = [m for m in (await child.get_messages()).messages if m.role == "assistant"][-1]
    assert copied == b"the report body"
    assert ref.name == "report.txt"
    assert answer.metadata["output"] == {"score": 7, "tags": ["a", "b"]}
    assert "Here is the report." in tool.content and '"score": 7' in tool.content


async def test_failure_and_unreachable_agent_are_clear_tool_errors(
    sa_runtime_factory: Any,
) -> None:
    with SdkAgent() as agent:
        pack = pack_for(agent, {"name": "helper", "blocking": True})
        provider = calls(("helper", {"message": "fail"}), "ok")
        async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
            thread = await rt.create_thread("boss")
            await thread.send_message("go")
            await rt.wait_idle()
            [failed] = tool_results((await thread.get_messages()).messages)
        url = agent.card_url
    assert failed.startswith(f"Failed to execute tool: Remote agent 'helper' ({url}) reported")
    assert "failed: It broke." in failed

    provider = calls(("helper", {"message": "anyone?"}), "ok")
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("boss")
        await thread.send_message("go")
        await rt.wait_idle()
        [gone] = tool_results((await thread.get_messages()).messages)
    assert gone.startswith(f"Failed to execute tool: Remote agent 'helper' ({url})")
    assert "agent card could not be read" in gone or "could not be reached" in gone


async def test_input_required_is_answered_through_subagent_message(
    sa_runtime_factory: Any,
) -> None:
    with SdkAgent() as agent:
        pack = pack_for(agent, {"name": "helper", "blocking": True})
        reference: dict[str, str] = {}

        def answer_it(request: Any) -> Any:
            ref = request.messages[-1].content.rsplit("Reference: ", 1)[-1].strip()
            reference["id"] = ref
            args = {"referenceId": ref, "message": "blue", "attachments": []}
            return {"tool_calls": [{"name": "subagent_message", "arguments": args}]}

        provider = calls(("helper", {"message": "ask"}), answer_it, "ok")
        async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
            thread = await rt.create_thread("boss")
            await thread.send_message("go")
            await rt.wait_idle()
            results = tool_results((await thread.get_messages()).messages)
            [entry] = thread.children
    assert "needs more input to continue (input-required): Which colour?" in results[0]
    assert "subagent_message" in results[0]
    assert results[1] == f"You chose blue\n\nReference: {reference['id']}"
    assert entry.status == "terminated"
    [(ctx1, task1, _), (ctx2, task2, _)] = agent.messages
    assert (ctx1, task1) == (ctx2, task2)  # the same remote task continued


async def test_resumable_instance_keeps_one_remote_context(sa_runtime_factory: Any) -> None:
    with SdkAgent() as agent:
        entry = {"name": "helper", "blocking": True, "resumable": {"maxInstances": 1}}
        pack = pack_for(agent, entry)
        holder: dict[str, str] = {}

        def created(request: Any) -> Any:
            holder["ref"] = request.messages[-1].content.rsplit("Reference: ", 1)[-1].strip()
            args = {"referenceId": holder["ref"], "message": "echo: two", "attachments": []}
            return {"tool_calls": [{"name": "subagent_message", "arguments": args}]}

        def third(request: Any) -> Any:
            args = {"referenceId": holder["ref"], "message": "echo: three", "attachments": []}
            return {"tool_calls": [{"name": "subagent_message", "arguments": args}]}

        create = {"agent": "helper", "name": "h1", "message": "echo: one", "attachments": []}
        provider = calls(("subagent_create", create), created, third, "ok")
        async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
            thread = await rt.create_thread("boss")
            await thread.send_message("go")
            await rt.wait_idle()
            results = tool_results((await thread.get_messages()).messages)
            [child_entry] = thread.children
    assert [r.split("\n\n")[0] for r in results] == ["one", "two", "three"]
    assert child_entry.status == "idle"
    contexts = {ctx for ctx, _, _ in agent.messages}
    tasks = {task for _, task, _ in agent.messages}
    assert len(contexts) == 1 and len(tasks) == 3


async def wait_for(check: Any, seconds: float = 20) -> None:
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out waiting")


async def acknowledged(rt: Any, thread: Any) -> None:
    """Wait until the child committed the task the remote acknowledged (a stop cancels it)."""
    for _ in range(400):
        await thread.refresh()
        if thread.children:
            record = await rt.store.get_value(thread.children[0].reference, "sa:a2a") or {}
            if record.get("task_id") and record.get("state") != "sending":
                return
        await asyncio.sleep(0.05)
    raise AssertionError("the remote task was never acknowledged")


async def test_nonblocking_result_reaches_the_parent_once(sa_runtime_factory: Any) -> None:
    with SdkAgent() as agent:
        pack = pack_for(agent, {"name": "helper", "blocking": False})
        provider = calls(("helper", {"message": "slow one"}), "waiting", "got it")
        async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
            thread = await rt.create_thread("boss")
            await thread.send_message("go")
            await wait_for(lambda: agent.messages)
            [result] = tool_results((await thread.get_messages()).messages)
            await thread.refresh()
            status = thread.children[0].status
            agent.release("one")
            await rt.wait_idle()
            messages = (await thread.get_messages(include_silent=True)).messages
    assert result.startswith("The subagent was initiated successfully. Reference: ")
    assert status == "waiting for one"  # the remote's status note, in the registry
    notes = [m for m in messages if (m.metadata or {}).get("subagent_event") == "result"]
    assert len(notes) == 1
    assert notes[0].content.endswith("has returned the following result:\n\nreleased one")
    assert agent.canceled == []


async def test_subagent_terminate_cancels_the_remote_task(sa_runtime_factory: Any) -> None:
    with SdkAgent() as agent:
        entry = {"name": "helper", "blocking": False, "resumable": {}}
        pack = pack_for(agent, entry)
        holder: dict[str, str] = {}

        def started(request: Any) -> Any:
            holder["ref"] = request.messages[-1].content.rsplit("Reference: ", 1)[-1].strip()
            return "started"

        def terminate(request: Any) -> Any:
            args = {"referenceId": holder["ref"]}
            return {"tool_calls": [{"name": "subagent_terminate", "arguments": args}]}

        create = {"agent": "helper", "name": "h1", "message": "slow never", "attachments": []}
        provider = calls(("subagent_create", create), started, terminate, "stopped")
        async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
            thread = await rt.create_thread("boss")
            await thread.send_message("go")
            await acknowledged(rt, thread)
            await thread.send_message("stop it")
            await rt.wait_idle()
            results = tool_results((await thread.get_messages()).messages)
            await thread.refresh()
            [child_entry] = thread.children
    assert results[-1] == f"Subagent {holder['ref']} terminated."
    assert child_entry.status == "terminated"
    [(_, task_id, _)] = agent.messages
    assert agent.canceled == [task_id]


def secured_pack(agent: SdkAgent, **remote: Any) -> Pack:
    headers = {"Authorization": "Bearer ${HELPER_TOKEN}"}
    return pack_for(agent, {"name": "helper", "blocking": True}, headers=headers, **remote)


async def test_wrong_credentials_are_a_clear_auth_error(sa_runtime_factory: Any) -> None:
    with SdkAgent(token="right-token-1234") as agent:
        provider = calls(("helper", {"message": "echo: hi"}), "ok")
        async with sa_runtime_factory(
            packs=[secured_pack(agent)], providers={"test": provider}
        ) as rt:
            thread = await rt.create_thread(
                "boss",
                env={"HELPER_TOKEN": "wrong-token-5678"},
                env_types={"HELPER_TOKEN": "secret"},
            )
            await thread.send_message("go")
            await rt.wait_idle()
            [refused] = tool_results((await thread.get_messages()).messages)
    assert refused.startswith(
        f"Failed to execute tool: Remote agent 'helper' ({agent.card_url}) refused"
    )
    assert "(HTTP 401): check the credentials in its headers." in refused
    assert "wrong-token-5678" not in refused


async def test_a_missing_header_variable_names_itself(sa_runtime_factory: Any) -> None:
    with SdkAgent(token="right-token-1234") as agent:
        provider = calls(("helper", {"message": "echo: hi"}), "ok")
        async with sa_runtime_factory(
            packs=[secured_pack(agent)], providers={"test": provider}
        ) as rt:
            thread = await rt.create_thread("boss")
            await thread.send_message("go")
            await rt.wait_idle()
            [missing] = tool_results((await thread.get_messages()).messages)
    assert "header variable 'HELPER_TOKEN' has no value" in missing
    assert agent.authorizations == []  # nothing was sent


async def test_a_secret_header_never_reaches_messages_logs_or_the_model(
    sa_runtime_factory: Any,
) -> None:
    token = "right-token-1234"
    with SdkAgent(token=token) as agent:
        provider = calls(("helper", {"message": "headers"}), "ok")
        async with sa_runtime_factory(
            packs=[secured_pack(agent)], providers={"test": provider}
        ) as rt:
            thread = await rt.create_thread(
                "boss", env={"HELPER_TOKEN": token}, env_types={"HELPER_TOKEN": "secret"}
            )
            await thread.send_message("go")
            await rt.wait_idle()
            child = await rt.get_thread(thread.children[0].reference)
            stored = [
                *(await thread.get_messages(include_silent=True)).messages,
                *(await child.get_messages(include_silent=True)).messages,
            ]
            logs = [*await thread.get_logs(limit=100), *await child.get_logs(limit=100)]
    assert agent.authorizations[-1] == f"Bearer {token}"  # the remote got it
    [result] = tool_results(stored)
    assert result.startswith("I was sent: [redacted]")
    everything = " ".join(
        [m.model_dump_json() for m in stored]
        + [log.model_dump_json() for log in logs]
        + [str(r.messages) for r in provider.seen]  # type: ignore[attr-defined]
    )
    assert token not in everything


async def test_an_exchange_past_its_timeout_fails_and_cancels_the_task(
    sa_runtime_factory: Any,
) -> None:
    with SdkAgent() as agent:
        pack = pack_for(agent, {"name": "helper", "blocking": True}, timeout=1)
        provider = calls(("helper", {"message": "slow forever"}), "ok")
        async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
            thread = await rt.create_thread("boss")
            await thread.send_message("go")
            await rt.wait_idle()
            [late] = tool_results((await thread.get_messages()).messages)
    assert late.startswith(f"Failed to execute tool: Remote agent 'helper' ({agent.card_url})")
    assert "did not finish within 1 seconds (its timeout)" in late
    [(_, task_id, _)] = agent.messages
    assert agent.canceled == [task_id]


async def test_immediate_remote_child_starts_with_its_parent(sa_runtime_factory: Any) -> None:
    with SdkAgent() as agent:
        pack = pack_for(agent, {"name": "helper", "blocking": False, "immediate": True})
        async with sa_runtime_factory(packs=[pack], providers={"test": calls("noted")}) as rt:
            thread = await rt.create_thread("boss")
            [entry] = thread.children
            await rt.wait_idle()
            messages = (await thread.get_messages(include_silent=True)).messages
    assert [text for _, _, text in agent.messages] == ["Begin your work as helper."]
    [note] = [m for m in messages if (m.metadata or {}).get("subagent_id") == entry.reference]
    assert note.content.endswith(
        "has returned the following result:\n\nyou said: Begin your work as helper."
    )


async def test_an_agent_that_does_not_stream_is_polled(sa_runtime_factory: Any) -> None:
    with SdkAgent(streaming=False) as agent:
        pack = pack_for(agent, {"name": "helper", "blocking": True})
        provider = calls(("helper", {"message": "slow polled"}), "ok")
        async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
            thread = await rt.create_thread("boss")
            await thread.send_message("go", wait=False)
            await wait_for(lambda: agent.messages)
            agent.release("polled")
            await rt.wait_idle()
            [result] = tool_results((await thread.get_messages()).messages)
    assert result.startswith("released polled\n\nReference: ")


async def test_stopping_the_parent_cancels_its_remote_tasks(sa_runtime_factory: Any) -> None:
    with SdkAgent() as agent:
        pack = pack_for(agent, {"name": "helper", "blocking": True})
        provider = calls(("helper", {"message": "slow forever"}), "ok")
        async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
            thread = await rt.create_thread("boss")
            await thread.send_message("go", wait=False)
            await acknowledged(rt, thread)
            await thread.stop()
            await rt.wait_idle()
            child = await rt.get_thread(thread.children[0].reference)
    [(_, task_id, _)] = agent.messages
    assert agent.canceled == [task_id]
    assert child.row.stopped


async def test_nonblocking_child_waiting_for_input_is_answered_later(
    sa_runtime_factory: Any,
) -> None:
    with SdkAgent() as agent:
        pack = pack_for(agent, {"name": "helper", "blocking": False})
        seen: dict[str, str] = {}

        def answer_it(request: Any) -> Any:  # the turn the question's notification starts
            note = request.messages[-1].content
            seen["question"] = note
            ref = note.split("(reference: ", 1)[1].split(")", 1)[0]
            args = {"referenceId": ref, "message": "green", "attachments": []}
            return {"tool_calls": [{"name": "subagent_message", "arguments": args}]}

        provider = calls(("helper", {"message": "ask"}), "asked", answer_it, "sent", "done")
        async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
            thread = await rt.create_thread("boss")
            await thread.send_message("go")
            await rt.wait_idle()
            messages = (await thread.get_messages(include_silent=True)).messages
            await thread.refresh()
            final = thread.children[0].status
    assert "needs more input to continue (input-required): Which colour?" in seen["question"]
    reports = [m.content for m in messages if (m.metadata or {}).get("subagent_id")]
    assert reports[-1].endswith("has returned the following result:\n\nYou chose green")
    assert final == "terminated"
    assert [text for _, _, text in agent.messages] == ["ask", "green"]
    assert len({task for _, task, _ in agent.messages}) == 1
