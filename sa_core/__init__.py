"""standard-agents: the Python implementation of the Standard Agents specification.

The public API. Names load lazily, so ``import sa_core`` stays fast and pulls in neither the
database layer, the HTTP server nor any provider.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sa_core.quietimport import collector_paused

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # definitions
    "AgentDefinition": "sa_core.spec",
    "AttachmentRef": "sa_core.spec",
    "EffectDefinition": "sa_core.spec",
    "FileRecord": "sa_core.spec",
    "HookDefinition": "sa_core.spec",
    "InjectMessageInput": "sa_core.spec",
    "Log": "sa_core.spec",
    "MCPServerDefinition": "sa_core.spec",
    "Message": "sa_core.spec",
    "MessagesResult": "sa_core.spec",
    "ModelDefinition": "sa_core.spec",
    "ModelSettings": "sa_core.spec",
    "Pack": "sa_core.spec",
    "PromptCaching": "sa_core.spec",
    "PromptDefinition": "sa_core.spec",
    "PromptToolConfig": "sa_core.spec",
    "QueueMessageInput": "sa_core.spec",
    "ScheduleDefinition": "sa_core.spec",
    "ScheduleRecord": "sa_core.spec",
    "RemoteAgentDefinition": "sa_core.spec",
    "ScheduledEffect": "sa_core.spec",
    "ServingPolicy": "sa_core.spec",
    "SessionToolBinding": "sa_core.spec",
    "SideConfig": "sa_core.spec",
    "SubagentRegistryEntry": "sa_core.spec",
    "SubagentToolConfig": "sa_core.spec",
    "SubpromptConfig": "sa_core.spec",
    "ThreadEndpointDefinition": "sa_core.spec",
    "ToolAttachment": "sa_core.spec",
    "ToolCall": "sa_core.spec",
    "ToolDefinition": "sa_core.spec",
    "ToolResult": "sa_core.spec",
    "VariableDefinition": "sa_core.spec",
    "define_agent": "sa_core.spec",
    "define_effect": "sa_core.spec",
    "define_hook": "sa_core.spec",
    "define_mcp_server": "sa_core.spec",
    "define_model": "sa_core.spec",
    "define_prompt": "sa_core.spec",
    "define_schedule": "sa_core.spec",
    "define_remote_agent": "sa_core.spec",
    "define_thread_endpoint": "sa_core.spec",
    "define_tool": "sa_core.spec",
    # runtime
    "EndpointError": "sa_core.errors",
    "EndpointRequest": "sa_core.server.endpoints",
    "EndpointResponse": "sa_core.server.endpoints",
    "Runtime": "sa_core.runtime",
    "ThreadState": "sa_core.state",
    "ReplayReport": "sa_core.replay",
    # providers
    "BaseProvider": "sa_core.providers",
    "Provider": "sa_core.providers",
    "ProviderRequest": "sa_core.providers",
    "ProviderResponse": "sa_core.providers",
    # errors
    "ConfigurationError": "sa_core.errors",
    "MissingVariablesError": "sa_core.errors",
    "PackValidationError": "sa_core.errors",
    "ScheduleDefinitionError": "sa_core.errors",
    "StoreError": "sa_core.errors",
    "StoreItem": "sa_core.memory",
    "StoreConfig": "sa_core.spec",
    "ProviderError": "sa_core.errors",
    "SAError": "sa_core.errors",
    "ThreadDocumentError": "sa_core.errors",
    "ThreadNotFoundError": "sa_core.errors",
    "ThreadTerminatedError": "sa_core.errors",
    "CutPointError": "sa_core.errors",
    "SharedHistoryError": "sa_core.errors",
    "ThreadBusyError": "sa_core.errors",
    "LineageEntry": "sa_core.spec.lineage",
}

__all__ = [
    "AgentDefinition",
    "AttachmentRef",
    "BaseProvider",
    "ConfigurationError",
    "CutPointError",
    "EffectDefinition",
    "EndpointError",
    "EndpointRequest",
    "EndpointResponse",
    "FileRecord",
    "HookDefinition",
    "InjectMessageInput",
    "LineageEntry",
    "Log",
    "MCPServerDefinition",
    "Message",
    "MessagesResult",
    "MissingVariablesError",
    "ModelDefinition",
    "ModelSettings",
    "Pack",
    "PackValidationError",
    "PromptCaching",
    "PromptDefinition",
    "PromptToolConfig",
    "Provider",
    "ProviderError",
    "ProviderRequest",
    "ProviderResponse",
    "QueueMessageInput",
    "RemoteAgentDefinition",
    "ReplayReport",
    "Runtime",
    "SAError",
    "ScheduleDefinition",
    "ScheduleDefinitionError",
    "ScheduleRecord",
    "ScheduledEffect",
    "ServingPolicy",
    "SessionToolBinding",
    "SharedHistoryError",
    "SideConfig",
    "StoreConfig",
    "StoreError",
    "StoreItem",
    "SubagentRegistryEntry",
    "SubagentToolConfig",
    "SubpromptConfig",
    "ThreadBusyError",
    "ThreadDocumentError",
    "ThreadEndpointDefinition",
    "ThreadNotFoundError",
    "ThreadState",
    "ThreadTerminatedError",
    "ToolAttachment",
    "ToolCall",
    "ToolDefinition",
    "ToolResult",
    "VariableDefinition",
    "define_agent",
    "define_effect",
    "define_hook",
    "define_mcp_server",
    "define_model",
    "define_prompt",
    "define_remote_agent",
    "define_schedule",
    "define_thread_endpoint",
    "define_tool",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sa_core' has no attribute {name!r}")
    with collector_paused():
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:
    from sa_core.errors import (
        ConfigurationError,
        CutPointError,
        EndpointError,
        MissingVariablesError,
        PackValidationError,
        ProviderError,
        SAError,
        ScheduleDefinitionError,
        SharedHistoryError,
        StoreError,
        ThreadBusyError,
        ThreadDocumentError,
        ThreadNotFoundError,
        ThreadTerminatedError,
    )
    from sa_core.memory import StoreItem
    from sa_core.providers import BaseProvider, Provider, ProviderRequest, ProviderResponse
    from sa_core.replay import ReplayReport
    from sa_core.runtime import Runtime
    from sa_core.server.endpoints import EndpointRequest, EndpointResponse
    from sa_core.spec import (
        AgentDefinition,
        AttachmentRef,
        EffectDefinition,
        FileRecord,
        HookDefinition,
        InjectMessageInput,
        Log,
        MCPServerDefinition,
        Message,
        MessagesResult,
        ModelDefinition,
        ModelSettings,
        Pack,
        PromptCaching,
        PromptDefinition,
        PromptToolConfig,
        QueueMessageInput,
        RemoteAgentDefinition,
        ScheduledEffect,
        ScheduleDefinition,
        ScheduleRecord,
        SessionToolBinding,
        SideConfig,
        StoreConfig,
        SubagentRegistryEntry,
        SubagentToolConfig,
        SubpromptConfig,
        ThreadEndpointDefinition,
        ToolAttachment,
        ToolCall,
        ToolDefinition,
        ToolResult,
        VariableDefinition,
        define_agent,
        define_effect,
        define_hook,
        define_mcp_server,
        define_model,
        define_prompt,
        define_remote_agent,
        define_schedule,
        define_thread_endpoint,
        define_tool,
    )
    from sa_core.spec.lineage import LineageEntry
    from sa_core.state import ThreadState
