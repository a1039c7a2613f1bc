"""`{{name}}`: clips tool outputs longer than `max_chars` to their first and last `keep_chars`,
with a placeholder between that names where the whole output was stored. Tool calls are never
touched, so every call keeps its result, and only the entries the host offers (between the
protected head and the verbatim tail, not pinned) change.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cairn_sdk import (
    CompactRequest, Entry, NothingToDo, Outcome, Strategy, ToolResult, changed_range_outcome,
    count_tokens, export_strategy, log_info, parse_config, placeholder_text, recount,
    replaceable_range, store_artifact,
)


@dataclass
class Config:
    """The step's `[chain.config]`; every key is optional."""

    #: Outputs up to this many chars stay whole.
    max_chars: int = 4_000
    #: Chars kept from the start and from the end of a clipped output.
    keep_chars: int = 600

    def __post_init__(self) -> None:
        if self.max_chars < 0 or self.keep_chars < 0:
            raise ValueError("max_chars and keep_chars must be 0 or more")


class Plugin(Strategy):
    def compact(self, request: CompactRequest) -> Outcome:
        config = parse_config(Config, request.config)
        changed: dict[int, Entry] = {}
        for i in replaceable_range(request):
            entry = request.entries[i]
            if entry.pinned:  # the host refuses outcomes that change a pinned entry
                continue
            parts = [clip_result(part, config) if isinstance(part, ToolResult) else part for part in entry.parts]
            if parts != entry.parts:
                clipped = dataclasses.replace(entry, parts=parts)
                recount(clipped)
                changed[i] = clipped
        # One contiguous range: the changed entries, and those between them as they were.
        outcome = changed_range_outcome(request.entries, changed)
        if outcome is None:
            raise NothingToDo(f"no tool output longer than {config.max_chars} chars")
        log_info(f"clipped tool outputs in {len(changed)} entries")
        return outcome


def clip(text: str, config: Config) -> tuple[str, str] | None:
    """The head and tail of `text` when it is longer than `max_chars`."""
    if len(text) <= config.max_chars or len(text) <= 2 * config.keep_chars:
        return None
    return text[: config.keep_chars], text[len(text) - config.keep_chars :]


def clip_result(result: ToolResult, config: Config) -> ToolResult:
    """The result clipped, its whole content set aside in the archive; unchanged if short or
    already set aside."""
    ends = clip(result.content, config)
    if result.elided is not None or ends is None:
        return result
    head, tail = ends
    uri = store_artifact(result.content)
    marker = placeholder_text("clipped", count_tokens(result.content), uri)
    return dataclasses.replace(result, content=f"{head}\n{marker}\n{tail}", elided=uri)


# componentize-py instantiates `app.WitWorld`: the SDK's wrapper around Plugin.
WitWorld = export_strategy(Plugin)
