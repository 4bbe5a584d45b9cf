"""The pack the server benchmark serves: one chat agent whose prompt includes the chat."""

from __future__ import annotations

from sa_core import Pack, define_agent, define_model, define_prompt

PACK = Pack(
    name="bench",
    agents=[define_agent(name="chatter", side_a={"prompt": "chat"})],
    prompts=[define_prompt(name="chat", model="fast", prompt="Chat.", include_chat=True)],
    models=[define_model(name="fast", provider="test", model="bench")],
)
