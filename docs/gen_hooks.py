"""Generate docs/hooks.md from the hook specifications in sa_hooks/specs.py.

Run: ``python docs/gen_hooks.py`` (tests/test_docs.py fails when the page is stale).
"""

from __future__ import annotations

import inspect
from pathlib import Path

HEADER = """# Hooks reference

Generated from `sa_hooks/specs.py` by `docs/gen_hooks.py`; do not edit by hand.

Plugins implement these with `@hookimpl` from `sa_hooks` and register under the `sa` entry-point
group. Hooks defined inside a pack (`define_hook(id=..., hook=..., execute=...)`) implement the same
nine lifecycle hooks (without the `sa_` prefix) and run only where the active prompt (else the
agent) lists their id, in list order. Transforming hooks are chained: each implementation receives
the previous one's output; returning `None` keeps the value. Async implementations are awaited one
after another in pluggy's call order.

The host calls every implementation itself, so pluggy wrappers (`@hookimpl(wrapper=True)` or
`hookwrapper=True`) are refused when the plugin loads, with an error naming the plugin and the hook.
A plugin function whose name starts with `sa_` but matches no hook below is refused too (a typo
would otherwise never be called); the error names it and the closest hook.

A global hook plugin, for example one that redacts stored messages:

```python
from sa_hooks import hookimpl

@hookimpl
def sa_before_create_message(state, message):
    return message.model_copy(update={"content": scrub(message.content)})

@hookimpl
def sa_before_update_message(state, message_id, updates):
    if updates.get("content"):
        return {**updates, "content": scrub(updates["content"])}
```

```toml
[project.entry-points.sa]
my_redactor = "my_redactor"
```

Assistant replies are created as a pending row and then updated with their content, so a plugin
that rewrites message text implements both `sa_before_create_message` and
`sa_before_update_message`. See `plugins/sa-plugin-redact/` for a complete plugin.
"""


def render() -> str:
    """The page's Markdown."""
    from sa_hooks import specs

    sections = [HEADER]
    for name, function in inspect.getmembers(specs, inspect.isfunction):
        if not name.startswith("sa_"):
            continue
        signature = str(inspect.signature(function)).replace("'", "")
        doc = inspect.cleandoc(function.__doc__ or "")
        sections.append(f"## `{name}{signature}`\n\n{doc}\n")
    return "\n".join(sections)


def main() -> None:
    """Write docs/hooks.md."""
    Path(__file__).with_name("hooks.md").write_text(render())


if __name__ == "__main__":
    main()
