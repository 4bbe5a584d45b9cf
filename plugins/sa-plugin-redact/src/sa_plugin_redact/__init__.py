"""A hook plugin that redacts personal data and secrets from stored messages.

Installed, it is found through the ``sa`` entry-point group and sees every thread of every pack
(a *global* plugin). It implements two lifecycle hooks:

* ``sa_before_create_message``: a message about to be stored (user input, tool results,
  queued and injected messages);
* ``sa_before_update_message``: field updates about to be applied (an assistant reply is
  stored as a pending row and completed by an update).

It rewrites ``content``, ``reasoning_content`` and tool-call ``arguments``, replacing:

* email addresses with ``[REDACTED EMAIL]``;
* payment card numbers (13 to 19 digits, spaces or dashes allowed, **Luhn-checked**) with
  ``[REDACTED CARD]``;
* phone numbers (7 to 15 digits, written with a leading ``+``, parentheses or separators)
  with ``[REDACTED PHONE]``;
* the values of variables declared ``secret`` (by the pack's agents, prompts or tools, or
  typed secret on the thread) with ``[REDACTED SECRET]``.

Identifiers are never rewritten: UUIDs and tokens of letters and digits such as hex ids,
``call_01abc...`` or ``msg-12345678`` keep every character, so a subagent reference or a tool
call id never turns into ``[REDACTED PHONE]``. Card and phone numbers are looked for only in the
text between identifiers.

The module itself is the plugin (its ``@hookimpl`` functions use a default :class:`Redactor`);
register a configured :class:`Redactor` instance instead to change what is redacted::

    Runtime(packs=[...], plugins=[Redactor(phones=False)], load_entrypoints=False)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from sa_hooks import hookimpl

__version__ = "0.1.0"

EMAIL = "[REDACTED EMAIL]"
CARD = "[REDACTED CARD]"
PHONE = "[REDACTED PHONE]"
SECRET = "[REDACTED SECRET]"

MIN_SECRET_LENGTH = 4
"""Secret values shorter than this are not redacted (too likely to match ordinary text)."""

_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_PHONE = re.compile(r"(?<![\w+])(?:\+|\(\d)?[\d()][\d()\s.-]{5,22}\d(?![\w-])")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$|^\d{1,2}[./-]\d{1,2}[./-]\d{2,4}$")
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_TEXT_FIELDS = ("content", "reasoning_content")
_UUID = r"[0-9A-Fa-f]{8}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{12}"
_IDENTIFIER = re.compile(
    rf"(?<![\w-])(?:{_UUID}|(?=[\w-]*[A-Za-z])(?=[\w-]*\d)[\w-]{{8,}})(?![\w-])", re.ASCII
)
"""A UUID, or a run of 8+ letters, digits, ``_`` and ``-`` with at least one letter and digit."""


def luhn_valid(digits: str) -> bool:
    """Whether a digit string passes the Luhn checksum used by payment cards.

    Args:
        digits: the digits only.

    Returns:
        True for a valid checksum.
    """
    if not digits.isdigit():
        return False
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    return CARD if 13 <= len(digits) <= 19 and luhn_valid(digits) else match.group(0)


def _looks_like_phone(text: str) -> bool:
    """Rule out what the phone pattern also matches: dates, IP addresses, decimals, ids."""
    digits = re.sub(r"\D", "", text)
    if not 7 <= len(digits) <= 15 or text.count("(") != text.count(")"):
        return False
    if _DATE.match(text) or _IPV4.match(text):
        return False
    separators = re.findall(r"[\s.-]", text)
    if separators == ["."]:
        return False  # a decimal number
    groups = re.findall(r"\d+", text)
    if any(len(g) == 1 for g in groups[1:]) or (len(groups[0]) == 1 and not text.startswith("+")):
        return False
    formatted = text.startswith("+") or "(" in text or bool(separators)
    return formatted or len(digits) >= 10


def _phone(match: re.Match[str]) -> str:
    text = match.group(0).strip()
    if not _looks_like_phone(text):
        return match.group(0)
    trailing = match.group(0)[len(match.group(0).rstrip()) :]
    return PHONE + trailing


class Redactor:
    """The redaction rules, as a pluggy plugin object.

    Args:
        emails: redact email addresses.
        cards: redact Luhn-valid card numbers.
        phones: redact phone numbers.
        secrets: redact values of secret variables.
    """

    def __init__(
        self,
        *,
        emails: bool = True,
        cards: bool = True,
        phones: bool = True,
        secrets: bool = True,
    ) -> None:
        self.emails = emails
        self.cards = cards
        self.phones = phones
        self.secrets = secrets

    def redact(self, text: str, secret_values: Iterable[str] = ()) -> str:
        """Redact one text.

        Secrets go first (a secret may look like anything), then emails, cards, phones.

        Args:
            text: the text.
            secret_values: values to hide verbatim.

        Returns:
            The redacted text (the same object when nothing matched).
        """
        if self.secrets:
            for value in sorted(set(secret_values), key=len, reverse=True):
                if len(value) >= MIN_SECRET_LENGTH and value in text:
                    text = text.replace(value, SECRET)
        if self.emails:
            text = _EMAIL.sub(EMAIL, text)
        if self.cards or self.phones:
            text = _outside_identifiers(text, self._numbers)
        return text

    def _numbers(self, text: str) -> str:
        if self.cards:
            text = _CARD.sub(_card, text)
        if self.phones:
            text = _PHONE.sub(_phone, text)
        return text

    def secret_values(self, state: Any) -> list[str]:
        """The current values of the thread's secret variables.

        Args:
            state: the ``ThreadState``.

        Returns:
            The resolvable values (unset secrets are skipped).
        """
        if not self.secrets:
            return []
        values = []
        for name in _secret_names(state):
            value = state.env_or_none(name)
            if value:
                values.append(value)
        return values

    def _fields(self, fields: dict[str, Any], secrets: list[str]) -> dict[str, Any]:
        """Redacted copies of the text fields and tool-call arguments present in ``fields``."""
        changed: dict[str, Any] = {}
        for name in _TEXT_FIELDS:
            value = fields.get(name)
            if isinstance(value, str):
                redacted = self.redact(value, secrets)
                if redacted != value:
                    changed[name] = redacted
        calls = fields.get("tool_calls")
        if calls:
            new_calls = [self._call(call, secrets) for call in calls]
            if new_calls != [_as_dict(c) for c in calls]:
                changed["tool_calls"] = new_calls
        return changed

    def _call(self, call: Any, secrets: list[str]) -> dict[str, Any]:
        data = _as_dict(call)
        function = dict(data.get("function") or {})
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            function["arguments"] = self.redact(arguments, secrets)
        return {**data, "function": function}

    @hookimpl
    def sa_before_create_message(self, state: Any, message: Any) -> Any | None:
        """Redact a message before it is stored (see :mod:`sa_plugin_redact`)."""
        fields = {
            "content": message.content,
            "reasoning_content": message.reasoning_content,
            "tool_calls": message.tool_calls,
        }
        changed = self._fields(fields, self.secret_values(state))
        if not changed:
            return None
        # validate again so tool calls stay ToolCall objects, not dicts
        return type(message).model_validate({**message.model_dump(), **changed})

    @hookimpl
    def sa_before_update_message(
        self, state: Any, message_id: str, updates: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Redact the text fields of a stored message's updates."""
        changed = self._fields(updates, self.secret_values(state))
        return {**updates, **changed} if changed else None


def _outside_identifiers(text: str, rewrite: Any) -> str:
    """Apply ``rewrite`` to the stretches of ``text`` between identifiers, keeping those intact."""
    pieces: list[str] = []
    start = 0
    for match in _IDENTIFIER.finditer(text):
        pieces.append(rewrite(text[start : match.start()]))
        pieces.append(match.group(0))
        start = match.end()
    if not pieces:
        return str(rewrite(text))
    pieces.append(rewrite(text[start:]))
    return "".join(pieces)


def _as_dict(call: Any) -> dict[str, Any]:
    if isinstance(call, dict):
        return call
    dumped: dict[str, Any] = call.model_dump(exclude_none=True)
    return dumped


def _secret_names(state: Any) -> frozenset[str]:
    """Variables declared secret in the thread's package, plus the thread's secret-typed env."""
    names: frozenset[str] = state.secret_names()
    return names


default = Redactor()
"""The rules the module-level hooks apply: everything on."""


@hookimpl
def sa_before_create_message(state: Any, message: Any) -> Any | None:
    """Redact a message before it is stored, with the :data:`default` rules."""
    return default.sa_before_create_message(state, message)


@hookimpl
def sa_before_update_message(state: Any, message_id: str, updates: dict[str, Any]) -> Any | None:
    """Redact a stored message's updates, with the :data:`default` rules."""
    return default.sa_before_update_message(state, message_id, updates)


def redact_text(text: str, secret_values: Iterable[str] = ()) -> str:
    """Redact a text with the :data:`default` rules.

    Args:
        text: the text.
        secret_values: values to hide verbatim.

    Returns:
        The redacted text.
    """
    return default.redact(text, secret_values)


__all__ = [
    "CARD",
    "EMAIL",
    "PHONE",
    "SECRET",
    "Redactor",
    "default",
    "luhn_valid",
    "redact_text",
    "sa_before_create_message",
    "sa_before_update_message",
]
