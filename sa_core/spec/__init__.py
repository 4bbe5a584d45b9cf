"""Spec models and the ``define_*`` API."""

from sa_core.spec.agents import (
    AgentDefinition,
    ServingPolicy,
    SessionToolBinding,
    Side,
    SideConfig,
    define_agent,
)
from sa_core.spec.caching import PromptCaching
from sa_core.spec.effects import EffectDefinition, define_effect
from sa_core.spec.endpoints import ThreadEndpointDefinition, define_thread_endpoint
from sa_core.spec.hooks import HookDefinition, HookName, define_hook
from sa_core.spec.mcp import MCPServerDefinition, define_mcp_server
from sa_core.spec.models import ModelCapabilities, ModelDefinition, define_model
from sa_core.spec.modelsettings import ModelSettings
from sa_core.spec.packs import Pack
from sa_core.spec.prompts import (
    CompactionConfig,
    EnvPart,
    ImmediateConfig,
    IncludePart,
    PromptDefinition,
    PromptToolConfig,
    ReasoningSpec,
    ResumableConfig,
    SubagentToolConfig,
    SubpromptConfig,
    TextPart,
    ToolEntry,
    define_prompt,
    tool_entry_name,
)
from sa_core.spec.records import (
    AttachmentRef,
    FileRecord,
    FileStats,
    GrepResult,
    InjectMessageInput,
    Log,
    Message,
    MessagesResult,
    QueueMessageInput,
    ScheduledEffect,
    SubagentRegistryEntry,
    ToolAttachment,
    ToolCall,
    ToolCallFunction,
    ToolResult,
)
from sa_core.spec.remote import RemoteAgentDefinition, define_remote_agent
from sa_core.spec.schedules import ScheduleDefinition, ScheduleRecord, define_schedule
from sa_core.spec.stores import StoreConfig
from sa_core.spec.tools import ToolDefinition, define_tool
from sa_core.spec.variables import VariableDefinition

__all__ = [
    "AgentDefinition",
    "AttachmentRef",
    "EffectDefinition",
    "EnvPart",
    "FileRecord",
    "FileStats",
    "GrepResult",
    "HookDefinition",
    "HookName",
    "ImmediateConfig",
    "IncludePart",
    "InjectMessageInput",
    "Log",
    "MCPServerDefinition",
    "Message",
    "MessagesResult",
    "ModelCapabilities",
    "ModelDefinition",
    "ModelSettings",
    "Pack",
    "PromptCaching",
    "CompactionConfig",
    "PromptDefinition",
    "PromptToolConfig",
    "QueueMessageInput",
    "ReasoningSpec",
    "RemoteAgentDefinition",
    "ResumableConfig",
    "ScheduleDefinition",
    "ScheduleRecord",
    "ScheduledEffect",
    "StoreConfig",
    "SessionToolBinding",
    "ServingPolicy",
    "Side",
    "SideConfig",
    "SubagentRegistryEntry",
    "SubagentToolConfig",
    "SubpromptConfig",
    "TextPart",
    "ThreadEndpointDefinition",
    "ToolAttachment",
    "ToolCall",
    "ToolCallFunction",
    "ToolDefinition",
    "ToolEntry",
    "ToolResult",
    "VariableDefinition",
    "define_agent",
    "define_effect",
    "define_hook",
    "define_mcp_server",
    "define_model",
    "define_prompt",
    "define_schedule",
    "define_remote_agent",
    "define_thread_endpoint",
    "define_tool",
    "tool_entry_name",
]
