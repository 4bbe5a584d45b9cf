"""Scoped variables: what a child inherits from its parent's env, and the missing ones.

A child gets its parent's env minus the variables its agent graph declares ``scoped``
(:func:`child_env`). When a variable the child needs is missing, the subagent call does not
create it: the call is stored as a variables request (:func:`defer_for_variables`), shown by
name only (:func:`variables_request`), and the child is created once the user provides the
values (:func:`sa_core.engine.subagents.subagents.provide_variables`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sa_core.engine.variables import scoped_names
from sa_core.spec import AgentDefinition, ToolResult

if TYPE_CHECKING:
    from sa_core.engine.flowview import SubagentFlow
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.engine.tools.tools import OfferedTool
    from sa_core.registry import PackScope
    from sa_core.store import Store, ThreadRow


def child_env(parent: ThreadRow, scope: PackScope, agent: AgentDefinition) -> dict[str, str]:
    """The parent's env (its row's) minus the child graph's scoped variables."""
    scoped = scoped_names(scope, agent)
    return {k: v for k, v in parent.env.items() if k not in scoped}


async def defer_for_variables(
    kernel: Kernel,
    thread: ThreadRef,
    flow: SubagentFlow | None,
    tool: OfferedTool,
    message: str,
    paths: list[str],
    name: str | None,
    arguments: dict[str, Any],
    missing: list[str],
) -> ToolResult:
    """Store the call as a variables request and answer it with where to provide them.

    The child is not created: :func:`sa_core.engine.subagents.subagents.provide_variables` creates
    it with the original payload once the user has provided the missing values.
    """
    assert tool.agent is not None and tool.agent_scope is not None
    required = sorted(scoped_names(tool.agent_scope, tool.agent) | set(missing))
    payload = {
        "agent": tool.name,
        "package": tool.agent_scope.package,
        "message": message,
        "attachments": paths,
        "name": name,
        "arguments": arguments,
        "required": required,
        "missing": missing,
        "owner_side": flow.current_side if flow is not None else "a",
        "prompt": thread.prompt.name if thread.prompt is not None else None,
    }
    thread_id = thread.thread_id
    request_id = await kernel.store.create_env_request(thread_id, payload)
    endpoint = f"/api/packages/{thread.row.package}/threads/{thread_id}/variables/{request_id}"
    return ToolResult(
        status="error",
        error=(
            f"Subagent '{tool.name}' needs variables that are not set: {', '.join(missing)}. "
            f"Ask the user to provide them at {endpoint}."
        ),
        error_code="subagent_env_required",
        error_data={
            "request_id": request_id,
            "endpoint": endpoint,
            "required": required,
            "missing": missing,
            "agent": tool.name,
        },
    )


async def variables_request(store: Store, parent_id: str, request_id: str) -> dict[str, Any] | None:
    """The public view of a pending variables request (names only, never values)."""
    payload = await store.get_env_request(parent_id, request_id)
    if payload is None:
        return None
    return {
        "request_id": request_id,
        "parent_thread_id": parent_id,
        "agent_name": payload["agent"],
        "registry_agent_name": payload["agent"],
        "required": payload["required"],
        "missing": payload["missing"],
    }


__all__ = ["child_env", "defer_for_variables", "variables_request"]
