"""The conversation a strategy is lent (contract 0.2.0).

The host keeps the entries; a strategy reads what it needs through a :class:`History`. By
default (:meth:`Strategy.compact_lent`) the SDK reads every entry in one batch, calls
``compact(request)`` and sends each replacement entry equal to the original of its id back as
an :class:`Original` index. A strategy that needs less (outlines, a few parts' text) overrides
``compact_lent(history, request)`` and reads only that.

:class:`History` itself serves a list of entries, for tests and native runs; in the component
the exporter passes a subclass that asks the host.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import host
from .helpers import store_artifact
from .types import (
    CompactRequest, Entry, EntryOutline, Failed, Image, ImageOutline, LentRequest, Original, Outcome,
    Part, PartOutline, Placeholder, Text, TextOutline, Thinking, ThinkingOutline, ToolCall,
    ToolResult, ToolResultOutline,
)

__all__ = ["History", "outline", "part_text", "lend", "compact_with_every_entry"]


class History:
    """The conversation being compacted, by index (positions, as ``protected_head`` and
    ``tail_start`` are). Valid only during the ``compact_lent`` call it was passed to."""

    def __init__(self, entries: Sequence[Entry] = ()) -> None:
        self._entries = list(entries)

    def len(self) -> int:
        """How many entries the conversation has."""
        return len(self._entries)

    def __len__(self) -> int:
        return self.len()

    def entries(self, start: int = 0, end: int | None = None) -> list[Entry]:
        """Entries [start, end), whole (clamped; ``end`` defaults to the end)."""
        return self._entries[_clamp(self.len(), start, end)]

    def outlines(self, start: int = 0, end: int | None = None) -> list[EntryOutline]:
        """Entries [start, end) without their text (clamped)."""
        return [outline(e) for e in self._entries[_clamp(self.len(), start, end)]]

    def part_text(self, index: int, part: int) -> str | None:
        """The text of part ``part`` of entry ``index`` (a tool call's: its arguments); None if
        there is no such part."""
        found = self._part(index, part)
        return None if found is None else part_text(found)

    def part_tokens(self, index: int, part: int) -> int | None:
        """The tokens of that text by the host's tokenizer (in the component, without it crossing)."""
        text = self.part_text(index, part)
        return None if text is None else host.count(text)

    def set_aside(self, index: int, part: int) -> str:
        """Stores that text with this compaction's archive (``archive:write``) and returns its
        ``artifact://`` URI; raises as :func:`store_artifact` does."""
        text = self.part_text(index, part)
        if text is None:
            raise Failed(f"entry {index} has no part {part}")
        return store_artifact(text)

    def _part(self, index: int, part: int) -> Part | None:
        if not (0 <= index < len(self._entries)):
            return None
        parts = self._entries[index].parts
        return parts[part] if 0 <= part < len(parts) else None


def _clamp(length: int, start: int, end: int | None) -> slice:
    end = length if end is None else min(max(end, 0), length)
    return slice(min(max(start, 0), end), end)


def part_text(part: Part) -> str:
    """The text of one part, as ``History.part_text`` gives it."""
    match part:
        case Text(text) | Thinking(text) | Placeholder(text):
            return text
        case ToolResult(content=content):
            return content
        case Image(reference):
            return reference
        case ToolCall(args=args):
            return args
    raise TypeError(f"not an entry part: {type(part).__name__}")


def outline(entry: Entry) -> EntryOutline:
    """An entry's outline, as the host makes it (sizes in UTF-8 bytes)."""

    def size(text: str) -> int:
        return len(text.encode())

    def part(p: Part) -> PartOutline:
        match p:
            case Text(text):
                return TextOutline(size(text))
            case Thinking(text):
                return ThinkingOutline(size(text))
            case ToolResult(call_id, content, is_error, elided):
                return ToolResultOutline(call_id, size(content), is_error, elided)
            case Image(reference):
                return ImageOutline(size(reference))
            case ToolCall() | Placeholder():
                return p
        raise TypeError(f"not an entry part: {type(p).__name__}")

    return EntryOutline(entry.id, entry.role, entry.origin, [part(p) for p in entry.parts], entry.tokens, entry.turn, entry.pinned)


def lend(request: CompactRequest) -> tuple[History, LentRequest]:
    """``request`` as the host sends it: its entries as a :class:`History`, the rest as a
    :class:`LentRequest`. For testing ``compact_lent``."""
    lent = LentRequest(
        request.purpose, request.archive_id, request.protected_head, request.tail_start, request.token_target,
        request.preserve, request.resume, request.previous_checkpoint, request.config, request.previous_checkpoint_through,
    )
    return History(request.entries), lent


def compact_with_every_entry(history: History, request: LentRequest, compact: Callable[[CompactRequest], Outcome]) -> Outcome:
    """The default path: every entry in one batch, ``compact``, then each replacement entry
    equal to the original of its id as :class:`Original` (so it does not cross back)."""
    entries = history.entries(0, history.len())
    # Snapshots taken before `compact` runs: it may change the entries it was given in place.
    originals = {e.id: (i, _snapshot(e)) for i, e in enumerate(entries)}
    outcome = compact(request.with_entries(entries))
    if isinstance(outcome, Outcome):
        outcome.replacement = [_as_original(r, originals) for r in outcome.replacement]
    return outcome


def _as_original(entry: Any, originals: dict[str, tuple[int, tuple[Any, ...]]]) -> Any:
    if isinstance(entry, Entry) and entry.id:
        found = originals.get(entry.id)
        if found is not None and found[1] == _snapshot(entry):
            return Original(found[0])
    return entry


def _snapshot(entry: Entry) -> tuple[Any, ...]:
    """Everything an entry holds, by reference: its strings are immutable, so nothing is copied."""
    parts = tuple((type(p), tuple(vars(p).values())) for p in entry.parts)
    return (entry.id, entry.role, entry.origin, parts, entry.tokens, entry.turn, entry.pinned)
