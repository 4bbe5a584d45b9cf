"""OpenAPI operation classes for routes whose bodies Litestar cannot describe from types."""

from __future__ import annotations

from dataclasses import dataclass

from litestar.openapi.spec import (
    OpenAPIFormat,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    RequestBody,
    Schema,
)

_BINARY = Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY)


def _any_body(description: str) -> RequestBody:
    return RequestBody(
        content={"*/*": OpenAPIMediaType(schema=_BINARY)}, description=description, required=False
    )


@dataclass
class RawUpload(Operation):
    """A route reading the raw request body (its ``Content-Type`` is the file's type)."""

    def __post_init__(self) -> None:
        self.request_body = RequestBody(
            content={"application/octet-stream": OpenAPIMediaType(schema=_BINARY)},
            description="The file's bytes; send its type as Content-Type.",
            required=True,
        )


@dataclass
class FileDownload(Operation):
    """A route answering a file's bytes with the file's own type."""

    def __post_init__(self) -> None:
        if self.responses is not None:
            self.responses["200"] = OpenAPIResponse(
                description="The file's bytes, with its MIME type as Content-Type.",
                content={"*/*": OpenAPIMediaType(schema=_BINARY)},
            )


@dataclass
class PackEndpoint(Operation):
    """A pack-defined thread endpoint: it may answer any status and any body."""

    def __post_init__(self) -> None:
        answer = OpenAPIResponse(
            description="Whatever the pack's handler answers (JSON, text or bytes).",
            content={"*/*": OpenAPIMediaType(schema=Schema())},
        )
        if self.responses is not None:
            self.responses["200"] = answer
            self.responses["default"] = answer


@dataclass
class PackEndpointWithBody(PackEndpoint):
    """A pack-defined thread endpoint taking a request body (POST, PUT, PATCH)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.request_body = _any_body("Passed to the endpoint's handler as is.")


@dataclass
class PublicPackEndpoint(PackEndpoint):
    """A pack endpoint declared ``public``: no API key needed."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.security = []


@dataclass
class PublicPackEndpointWithBody(PackEndpointWithBody):
    """A public pack endpoint taking a request body."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.security = []


def pack_endpoint_operation(*, with_body: bool, public: bool) -> type[Operation]:
    """Pick the operation class documenting a pack endpoint."""
    if public:
        return PublicPackEndpointWithBody if with_body else PublicPackEndpoint
    return PackEndpointWithBody if with_body else PackEndpoint
