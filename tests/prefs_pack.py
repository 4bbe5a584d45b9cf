"""The user-preferences pattern of docs/store.md: a pack whose tools remember and recall.

``remember_preference`` puts ``{"text": value}`` under ``("users", user, "prefs")`` and key
``name``; ``recall_preferences`` searches that namespace (by meaning when ``query`` is given,
the pack declaring an embedding model). Any thread of the pack sees what another wrote.
"""

from __future__ import annotations

import json
from typing import Any

from sa_core import Pack, StoreConfig, define_agent, define_model, define_prompt, define_tool


async def remember_preference(state: Any, args: dict[str, Any]) -> str:
    """Store one preference of a user (replacing an earlier one of the same name)."""
    namespace = ("users", args["user"], "prefs")
    await state.store.put(namespace, args["name"], {"text": args["value"]})
    return f"Noted: {args['name']} = {args['value']}"


async def recall_preferences(state: Any, args: dict[str, Any]) -> str:
    """The user's preferences, best matches of ``query`` first when one is given."""
    namespace = ("users", args["user"], "prefs")
    items = await state.store.search(namespace, query=args.get("query"), limit=20)
    return json.dumps({item.key: item.value["text"] for item in items})


def prefs_pack(*, provider: str = "openai") -> Pack:
    """Pack ``prefs``: agent ``assistant`` with the two tools, and an embedding model."""
    user = {"user": {"type": "string"}}
    tools = [
        define_tool(
            name="remember_preference",
            description="Remember a preference of the user.",
            args={
                "type": "object",
                "properties": {**user, "name": {"type": "string"}, "value": {"type": "string"}},
                "required": ["user", "name", "value"],
            },
            execute=remember_preference,
        ),
        define_tool(
            name="recall_preferences",
            description="Recall the user's preferences, those closest to query first.",
            args={
                "type": "object",
                "properties": {**user, "query": {"type": "string"}},
                "required": ["user"],
            },
            execute=recall_preferences,
        ),
    ]
    return Pack(
        name="prefs",
        agents=[define_agent(name="assistant", side_a={"prompt": "main"})],
        prompts=[
            define_prompt(
                name="main",
                model="chat",
                prompt="Help the user; remember what they like.",
                include_chat=True,
                tools=["remember_preference", "recall_preferences"],
            )
        ],
        models=[
            define_model(name="chat", provider=provider, model="gpt-4o-mini"),
            define_model(
                name="embed", provider=provider, model="text-embedding-3-small", kind="embedding"
            ),
        ],
        tools=tools,
        store=StoreConfig(embedding_model="embed", fields=["text"]),
    )
