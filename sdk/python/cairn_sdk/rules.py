"""The rules Cairn's host and its plugins must agree on, as the host applies them
(`host/rules/src/lib.rs`): the host checks every outcome with its own copy, so these must match
it character for character. ``test_rules.py`` pins them with the Rust tests' own cases.

Python strings index by code point, as Rust's ``chars()`` does, so "chars" below means the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from .types import Entry, Image, Placeholder, Text, Thinking, ToolCall, ToolResult

__all__ = [
    "SEED_MESSAGES", "SEED_MESSAGE_CHARS",
    "entry_text", "safe_cut_points", "placeholder_text", "thousands", "clip_chars",
]

#: How many operator messages a handover seed quotes…
SEED_MESSAGES = 3
#: …and how many characters of each.
SEED_MESSAGE_CHARS = 2_000


def entry_text(entry: Entry) -> str:
    """The text the model reads in an entry; token counts are taken of this.

    Each part contributes its text followed by a newline; a tool call reads ``name args``.
    """
    out: list[str] = []
    for part in entry.parts:
        match part:
            case Text(text) | Thinking(text) | Placeholder(text):
                out.append(text)
            case Image(reference):
                out.append(reference)
            case ToolCall(name=name, args=args):
                out.append(f"{name} {args}")
            case ToolResult(content=content):
                out.append(content)
        out.append("\n")
    return "".join(out)


def safe_cut_points(entries: Sequence[Entry]) -> list[bool]:
    """``cuts[i]`` is true when history may be cut just before entry ``i`` without separating a
    tool call from its result (no call made before ``i`` is answered at or after ``i``).
    ``cuts[len(entries)]`` (the end) is always true."""
    # The first entry answering each call id.
    answered_at: dict[str, int] = {}
    for i, entry in enumerate(entries):
        for part in entry.parts:
            if isinstance(part, ToolResult):
                answered_at.setdefault(part.call_id, i)
    cuts = [True] * (len(entries) + 1)
    reach = 0  # one past the latest entry answering a call made so far
    for i, entry in enumerate(entries):
        cuts[i] = reach <= i
        for part in entry.parts:
            if isinstance(part, ToolCall) and part.id in answered_at:
                reach = max(reach, answered_at[part.id] + 1)
    return cuts


def placeholder_text(what: str, tokens: int, uri: str) -> str:
    """The text Cairn puts where content was set aside, e.g.
    ``[elided ~12,345 tokens — recover: artifact://a-…/3]``. The URI itself travels as data
    (``ToolResult.elided``, ``Placeholder.uri``); this text is for the model."""
    return f"[{what} ~{thousands(tokens)} tokens — recover: {uri}]"


def thousands(n: int) -> str:
    """``12345`` → ``12,345``."""
    return f"{n:,}"


def clip_chars(text: str, max_chars: int) -> str:
    """The first ``max_chars`` chars of ``text``."""
    return text[:max_chars]
