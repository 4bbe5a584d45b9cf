"""``threads/{id}/approvals``: tool calls awaiting a human decision, and the decisions."""

from __future__ import annotations

from typing import Any

from litestar import Controller, get, post
from litestar.params import FromPath, JSONBody

from sa_core.errors import (
    ApprovalArgumentsError,
    ApprovalConflictError,
    ApprovalNotFoundError,
)
from sa_core.server.context import ThreadDep
from sa_core.server.errors import ApiError, errors
from sa_core.server.schemas import Base, convert


class ApprovalOut(Base, kw_only=True):
    """A tool call awaiting approval (``status`` ``pending``), or decided and about to run."""

    tool_call_id: str
    name: str
    arguments: dict[str, Any]
    requested_at: int
    status: str


class ApprovalsOut(Base, kw_only=True):
    """``GET threads/{id}/approvals``."""

    approvals: list[ApprovalOut]
    thread_status: str | None = None


class DecisionIn(Base, kw_only=True):
    """Approve (optionally with edited ``arguments``) or deny (with a ``reason``) a call."""

    approve: bool
    arguments: dict[str, Any] | None = None
    reason: str | None = None


class DecisionOut(Base, kw_only=True):
    """The decision taken; the thread continues in the background."""

    tool_call_id: str
    status: str


class ApprovalsController(Controller):
    """Human approval of tool calls."""

    path = "/threads"

    @get("/{thread_id:str}/approvals", responses=errors(404), summary="List pending approvals")
    async def list_approvals(self, thread: ThreadDep) -> ApprovalsOut:
        """Tool calls that wait for a human decision, in the order the model made them."""
        listed = await thread.pending_approvals()
        return ApprovalsOut(
            approvals=[convert(item, ApprovalOut) for item in listed],
            thread_status=thread.row.execution.get("status"),
        )

    @post(
        "/{thread_id:str}/approvals/{tool_call_id:str}",
        status_code=202,
        responses=errors(404, 409, 422),
        summary="Approve or deny a tool call",
    )
    async def decide(
        self, thread: ThreadDep, tool_call_id: FromPath[str], data: JSONBody[DecisionIn]
    ) -> DecisionOut:
        """Decide on a pending tool call.

        ``{"approve": true}`` runs the call (with ``arguments`` if given, validated against the
        tool's args) and continues the thread; ``{"approve": false, "reason": "..."}`` stores a
        failed tool result with the reason, which the model sees.
        """
        try:
            if data.approve:
                await thread.approve(tool_call_id, arguments=data.arguments)
            else:
                await thread.deny(tool_call_id, data.reason or "no reason given")
        except ApprovalNotFoundError as exc:
            raise ApiError(404, "approval_not_found", str(exc)) from None
        except ApprovalConflictError as exc:
            raise ApiError(409, "approval_decided", str(exc)) from None
        except ApprovalArgumentsError as exc:
            raise ApiError(422, "invalid_arguments", str(exc), problems=exc.problems) from None
        return DecisionOut(
            tool_call_id=tool_call_id, status="approved" if data.approve else "denied"
        )
