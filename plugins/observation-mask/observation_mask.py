"""`observation-mask`: OpenHands-style observation masking, without a model.

Tool observations (tool results) older than the last ``keep_last`` are replaced by a short
placeholder, ``[observation masked ~1,234 tokens — recover: artifact://…]``; the original goes
to the archive and ``ToolResult.elided`` carries its URI, so the agent (or a person) can get it
back. The agent's own reasoning and its tool calls stay as they are: the model still sees what
it did, only not every byte each command printed (Lindenbauer et al., "The Complexity Trap",
2025, found this as good as LLM summaries for coding agents, at no model cost).

An observation stays when any of these holds:

* it is among the last ``keep_last`` tool results of the conversation (tail included);
* it is an error and ``keep_errors`` is set (the agent learns from what failed);
* it is the latest result of a command the agent ran more than once — same tool, same
  arguments — while ``keep_latest_per_command`` is set: the current view of a file re-read or
  a check re-run stays whatever its age, its older copies go;
* its tool is in ``protected_tools`` (e.g. a todo list the agent re-reads);
* it is smaller than ``min_tokens``, or the placeholder would not be smaller;
* it was already set aside (it carries an ``artifact://`` URI);
* its entry is pinned, or lies in the protected head or the verbatim tail.

Tool calls are never touched, so every call keeps its result and the host's pairing checks
hold. The outcome replaces the run from the first to the last changed entry; the entries in
between come through verbatim, with their ids.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from cairn_sdk import (
    CompactRequest, Entry, NothingToDo, Outcome, RequestKind, Strategy, ToolCall, ToolResult,
    changed_range_outcome, count_tokens, log_info, parse_config, placeholder_text, recount,
    replaceable_range, store_artifact, thousands, tool_calls,
)

#: What the placeholder says was set aside.
WHAT = "observation masked"


@dataclass
class Config:
    """The step's ``[chain.config]``; every key is optional."""

    #: The most recent tool results that stay verbatim, counted over the whole conversation.
    keep_last: int = 10
    #: Keep error results whatever their age.
    keep_errors: bool = True
    #: Tools whose results are never masked.
    protected_tools: list[str] = field(default_factory=list)
    #: Results smaller than this (in tokens) are not worth a placeholder.
    min_tokens: int = 50
    #: Keep the latest result of each command (tool name + arguments) that ran more than once.
    keep_latest_per_command: bool = True

    def __post_init__(self) -> None:
        for name in ("keep_last", "min_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more, not {getattr(self, name)}")


@dataclass
class Tally:
    """Why observations in the replaceable window stayed, for the log and the nothing-to-do message."""

    masked: int = 0
    masked_tokens: int = 0
    recent: int = 0
    errors: int = 0
    latest: int = 0
    protected: int = 0
    small: int = 0
    already: int = 0
    pinned: int = 0

    def kept(self) -> str:
        reasons = [
            (self.recent, "recent"), (self.errors, "errors"), (self.latest, "latest of their command"),
            (self.protected, "protected tool"), (self.small, "small"), (self.already, "already masked"),
            (self.pinned, "pinned"),
        ]
        return ", ".join(f"{n} {why}" for n, why in reasons if n) or "none"


class ObservationMask(Strategy):
    def compact(self, request: CompactRequest) -> Outcome:
        if request.purpose is RequestKind.HANDOVER:
            raise NothingToDo("observation-mask compacts in place; it does not prepare handovers")
        config = parse_config(Config, request.config)
        window = replaceable_range(request)
        masker = Masker(request.entries, config)
        changed: dict[int, Entry] = {}
        for i in window:
            masked = masker.mask_entry(i)
            if masked is not None:
                changed[i] = masked
        tally = masker.tally
        outcome = changed_range_outcome(request.entries, changed)
        if outcome is None:
            raise NothingToDo(f"no tool observation to mask outside the last {config.keep_last} (kept: {tally.kept()})")
        log_info(
            f"masked {tally.masked} observations (~{thousands(tally.masked_tokens)} tokens) in {len(changed)} entries; "
            f"kept: {tally.kept()}"
        )
        return outcome


class Masker:
    """Decides, result by result, what to mask in one conversation."""

    def __init__(self, entries: list[Entry], config: Config) -> None:
        self.entries = entries
        self.config = config
        self.calls = tool_calls(entries)
        self.tally = Tally()
        # Every tool result in order: (entry index, part index), and which are kept as recent
        # or as the latest of their command.
        results = [
            (i, j) for i, e in enumerate(entries) for j, p in enumerate(e.parts) if isinstance(p, ToolResult)
        ]
        self.recent = set(results[max(len(results) - config.keep_last, 0) :]) if config.keep_last else set()
        # The latest result of each command that ran more than once: the current view of
        # something the agent kept checking. (A command run once has no older copies; keeping
        # "its latest" would keep every unique observation, and mask almost nothing.)
        runs: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for at in results:
            part = entries[at[0]].parts[at[1]]
            assert isinstance(part, ToolResult)
            runs.setdefault(self.command(part), []).append(at)
        self.latest = {ats[-1] for ats in runs.values() if len(ats) > 1}

    def command(self, result: ToolResult) -> tuple[str, str]:
        """The command a result answers: tool name and normalised arguments. A result whose call
        is not in the conversation is its own command (nothing is known to supersede it)."""
        call: ToolCall | None = self.calls.get(result.call_id)
        if call is None:
            return ("", "call:" + result.call_id)
        return (call.name, normalise_args(call.args))

    def mask_entry(self, index: int) -> Entry | None:
        """A copy of entry ``index`` with its maskable results masked, or None when none is."""
        entry = self.entries[index]
        if entry.pinned:
            self.tally.pinned += sum(isinstance(p, ToolResult) for p in entry.parts)
            return None
        parts = list(entry.parts)
        for j, part in enumerate(parts):
            if isinstance(part, ToolResult) and self.should_mask(index, j, part):
                parts[j] = self.mask(part)
        if parts == entry.parts:
            return None
        masked = dataclasses.replace(entry, parts=parts)
        recount(masked)
        return masked

    def should_mask(self, index: int, part_index: int, result: ToolResult) -> bool:
        config, tally = self.config, self.tally
        if is_masked(result):
            tally.already += 1
        elif (index, part_index) in self.recent:
            tally.recent += 1
        elif result.is_error and config.keep_errors:
            tally.errors += 1
        elif self.tool_name(result) in config.protected_tools:
            tally.protected += 1
        elif config.keep_latest_per_command and (index, part_index) in self.latest:
            tally.latest += 1
        else:
            return True
        return False

    def tool_name(self, result: ToolResult) -> str:
        call = self.calls.get(result.call_id)
        return call.name if call else ""

    def mask(self, result: ToolResult) -> ToolResult:
        """The result set aside, or unchanged when it is too small to be worth it."""
        tokens = count_tokens(result.content)
        # The placeholder's own size, with a URI as long as a real one will be.
        provisional = placeholder_text(WHAT, tokens, "artifact://a-0000000000000000/0000")
        if tokens < self.config.min_tokens or count_tokens(provisional) >= tokens:
            self.tally.small += 1
            return result
        uri = store_artifact(result.content)
        self.tally.masked += 1
        self.tally.masked_tokens += tokens
        return dataclasses.replace(result, content=placeholder_text(WHAT, tokens, uri), elided=uri)


def normalise_args(args: str) -> str:
    """JSON arguments with sorted keys and no spacing, so the same command compares equal
    however it was written; text that is not JSON is compared as it is."""
    try:
        return json.dumps(json.loads(args), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return args


def is_masked(result: ToolResult) -> bool:
    """Already set aside: ``elided`` names the URI (results set aside before the field existed
    carry only a placeholder text)."""
    content = result.content
    return result.elided is not None or (content.startswith("[") and "— recover: artifact://" in content and len(content) < 400)
