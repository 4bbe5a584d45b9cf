"""Messages: read a page, post one (202: the turn runs in the background)."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal

from litestar import Controller, Request, get, post
from litestar.params import FromQuery, JSONBody, QueryParameter

from sa_core.errors import ThreadTerminatedError
from sa_core.server.context import MessageThreadDep, ThreadDep
from sa_core.server.errors import ApiError, errors, to_api_error
from sa_core.server.schemas import MessageOut, MessagesOut, PostMessageIn, QueuedOut, convert
from sa_core.server.strict import strict_body
from sa_core.spec import AttachmentRef, ToolAttachment
from sa_core.spec.modelsettings import check_model_settings
from sa_core.spec.schemas import check_schema


def _attachments(
    data: JSONBody[PostMessageIn],
) -> list[ToolAttachment | AttachmentRef | dict[str, Any]]:
    found: list[ToolAttachment | AttachmentRef | dict[str, Any]] = []
    for index, item in enumerate(data.attachments):
        try:
            base64.b64decode(item.data, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(
                400, "invalid_attachment", f"attachments[{index}].data is not valid base64."
            ) from None
        found.append({"name": item.name, "mime_type": item.mime_type, "data": item.data})
    return found


class MessagesController(Controller):
    """Messages of one thread."""

    path = "/threads/{thread_id:str}/messages"

    @get("/", responses=errors(404), summary="Read messages")
    async def list_messages(
        self,
        thread: ThreadDep,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
        offset: Annotated[int, QueryParameter(ge=0, le=1_000_000_000)] = 0,
        order: FromQuery[Literal["asc", "desc"]] = "asc",
        include_silent: FromQuery[bool] = False,
        include_rewound: FromQuery[bool] = False,
    ) -> MessagesOut:
        """Read a page of top-level messages (``created_at`` in microseconds).

        ``include_rewound``: also the messages rewinds took out of the history, each with its
        rewind in ``metadata.rewound``.
        """
        page = await thread.get_messages(
            limit=limit,
            offset=offset,
            order=order,
            include_silent=include_silent,
            include_rewound=include_rewound,
        )
        return MessagesOut(
            messages=[convert(m.model_dump(mode="json"), MessageOut) for m in page.messages],
            total=page.total,
            has_more=page.has_more,
        )

    @post("/", status_code=202, responses=errors(404, 409, 413), summary="Post a message")
    async def post_message(
        self,
        message_thread: MessageThreadDep,
        data: JSONBody[PostMessageIn],
        request: Request[Any, Any, Any],
    ) -> QueuedOut:
        """Store (or queue, while a turn runs) a message; the turn runs in the background.

        ``user`` messages make side A act next, ``assistant`` messages side B. Watch the
        stream or poll the messages for the answer. Fields must have the schema's types
        exactly (``"silent": 0`` is a 400, not ``false``).
        """
        data = await strict_body(request, PostMessageIn)
        attachments = _attachments(data)
        if data.output_schema is not None:
            try:
                check_schema(data.output_schema)
            except ValueError as exc:
                raise ApiError(400, "invalid_request", f"output_schema is {exc}") from None
        if data.model_settings is not None:
            try:
                check_model_settings(data.model_settings)
            except ValueError as exc:
                raise ApiError(400, "invalid_request", str(exc)) from None
        try:
            message = await message_thread.send_message(
                data.content,
                data.role,
                attachments,
                silent=data.silent,
                wait=False,
                output_schema=data.output_schema,
                model_settings=data.model_settings,
            )
        except ThreadTerminatedError as exc:
            raise to_api_error(exc) from None
        out = convert(message.model_dump(mode="json"), MessageOut)
        return QueuedOut(status="queued", message_id=message.id, message=out)
