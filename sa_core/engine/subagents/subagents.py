"""Subagents: ``dual_ai`` agents run as child threads, in the four modes of the spec.

|               | blocking                          | non-blocking                          |
|---------------|-----------------------------------|---------------------------------------|
| non-resumable | the tool call runs the child to   | returns the reference at once; the    |
|               | the end of its session            | parent is notified when it ends       |
| resumable     | ``subagent_create`` /             | ``subagent_create`` returns at once;  |
|               | ``subagent_message`` wait per call| ``subagent_message`` any time         |

Children are threads with ``parent_id`` set, tracked in the parent's registry
(``SubagentRegistryEntry``). A child's session outcome (the mapped ``session_stop`` /
``session_fail`` payload) is persisted on the child, so results survive restarts.

This module is the entry: a subagent called by its agent name (:func:`run_subagent_tool`) and
a child deferred for missing variables created at last (:func:`provide_variables`). The rest
lives by concern:

* :mod:`sa_core.engine.subagents.subagent_lifecycle`: the lifecycle tools (``subagent_create``,
  ``subagent_message``, ``subagents``), offered and run.
* :mod:`sa_core.engine.subagents.subagent_spawn`: creating a child, handing it a message, immediate
  subagents.
* :mod:`sa_core.engine.subagents.subagent_report`: a child's result reaching its parent (blocking
  result, settle, notifications, status).
* :mod:`sa_core.engine.subagents.subagent_vars`: scoped variables and variables requests.
* :mod:`sa_core.engine.childlink`: the typed child -> parent record in the child's row.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sa_core.engine.delivery.delivery import open_thread
from sa_core.engine.files import attachment_paths
from sa_core.engine.subagents.subagent_spawn import create
from sa_core.engine.tools.tools import argument_text, resolve_entry
from sa_core.errors import ConfigurationError
from sa_core.spec import SubagentToolConfig, ToolResult

if TYPE_CHECKING:
    from sa_core.engine.flowview import SubagentFlow
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.engine.tools.tools import OfferedTool


async def run_subagent_tool(
    kernel: Kernel,
    thread: ThreadRef,
    flow: SubagentFlow | None,
    tool: OfferedTool,
    arguments: dict[str, Any],
    tool_message_id: str | None,
) -> ToolResult:
    """A non-resumable subagent called directly by its agent name."""
    assert tool.subagent is not None and tool.agent is not None and tool.agent_scope is not None
    config = tool.subagent
    message = _init_message(config, arguments)
    paths = (
        attachment_paths(arguments.get(config.init_attachments_property))
        if config.init_attachments_property
        else []
    )
    name = None
    if config.init_agent_name_property:
        value = arguments.get(config.init_agent_name_property)
        name = str(value) if value else None
    return await create(
        kernel,
        thread,
        flow,
        tool,
        message=message,
        paths=paths,
        name=name,
        arguments=arguments,
        tool_message_id=tool_message_id,
    )


def _init_message(config: SubagentToolConfig, arguments: Mapping[str, Any]) -> str:
    """The child's first message from the call's arguments."""
    if config.init_user_message_property:
        return argument_text(arguments.get(config.init_user_message_property)) or ""
    if isinstance(arguments.get("message"), str):
        return str(arguments["message"])
    return json.dumps(dict(arguments)) if arguments else ""


async def provide_variables(
    kernel: Kernel, parent_id: str, request_id: str, env: dict[str, str]
) -> dict[str, Any]:
    """Store the provided values and boot the deferred child with the original payload."""
    payload = await kernel.store.get_env_request(parent_id, request_id)
    if payload is None:
        raise ConfigurationError(
            f"No pending variables request {request_id} on thread {parent_id}; it may have been "
            "used already."
        )
    still_missing = [n for n in payload["missing"] if n not in env]
    if still_missing:
        raise ConfigurationError(
            f"Variables still missing for request {request_id}: {', '.join(still_missing)}."
        )
    parent = await open_thread(kernel, parent_id)
    parent_scope = kernel.scope_of(parent)
    scope = kernel.registry.scope(payload["package"])
    found = scope.find_agent(payload["agent"])
    if found is None:
        raise ConfigurationError(f"Agent {payload['agent']} is no longer available.")
    prompt = scope.prompts.get(payload.get("prompt") or "") if payload.get("prompt") else None
    tool = None
    if prompt is not None:
        tool = kernel.caches.tool_table(parent_scope, prompt).tools.get(payload["agent"])
    if tool is None:
        tool = resolve_entry(
            parent_scope, SubagentToolConfig(name=payload["agent"], blocking=False)
        )
    assert tool is not None and tool.subagent is not None
    nonblocking = tool.subagent.model_copy(update={"blocking": False})
    tool = dataclasses.replace(tool, subagent=nonblocking)
    parent.prompt = prompt
    result = await create(
        kernel,
        parent,
        None,
        tool,
        message=payload["message"],
        paths=payload["attachments"],
        name=payload.get("name"),
        arguments=payload.get("arguments") or {},
        tool_message_id=None,
        provided_env=env,
        owner_side=payload.get("owner_side"),
    )
    if result.status != "success":
        raise ConfigurationError(result.error or "The subagent could not be created.")
    await kernel.store.delete_env_request(parent_id, request_id)
    return {"request_id": request_id, "child_thread_id": result.subagent_id, "status": "success"}


__all__ = ["provide_variables", "run_subagent_tool"]
