"""The contract's types (`wit/0.2.0/types.wit`) as plain Python dataclasses, and its errors as
exceptions.

Plugins never see the classes componentize-py generates: :mod:`cairn_sdk.export` converts at the
edge, so plugin code and its tests run in plain CPython and read like ordinary Python.
Where the WIT has a variant, each case is its own class, for ``match`` statements:

    match part:
        case ToolResult(content=content, elided=None): ...
        case Text(text): ...

Mapping from the WIT: ``result<T, strategy-error>`` is "return T or raise :class:`StrategyError`";
a trigger's ``none`` decision is Python's ``None``; numbers are ``int`` (the host sends u32/u64).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
__all__ = [
    "Role", "Origin", "OutcomeClass", "RequestKind", "LogLevel",
    "Text", "Thinking", "ToolCall", "ToolResult", "Image", "Placeholder", "Part", "Entry",
    "Usage", "AgentRequest", "TriggerInput", "Advise", "Compact", "Handover", "TriggerDecision",
    "CompactRequest", "LentRequest", "EntryRange", "Original", "ReplacementEntry", "Outcome",
    "TextOutline", "ThinkingOutline", "ToolResultOutline", "ImageOutline", "PartOutline", "EntryOutline",
    "Boundary", "Proposal", "Commit", "Defer", "Reject", "CommitDecision",
    "Message", "ArchiveSummary", "EntrySlice", "Page", "Hit", "Hits",
    "StrategyError", "Unavailable", "NothingToDo", "Failed",
    "ModelError", "ModelDenied", "ModelUnavailable", "ModelTimeout", "ModelFailed",
    "ArchiveError", "ArchiveDenied", "ArchiveNotFound", "ArchiveInvalid", "ArchiveUnavailable",
]


class Role(enum.Enum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Origin(enum.Enum):
    """Where an entry came from: operator intent is kept verbatim, agent chatter may be summarised."""

    OPERATOR = "operator"
    AGENT = "agent"
    TOOL = "tool"
    HARNESS = "harness"
    SUMMARY = "summary"


class OutcomeClass(enum.Enum):
    """How a chain step ended (`rejected`: it passed the host's checks, the commit policy refused it)."""

    OK = "ok"
    TRAP = "trap"
    TIMEOUT = "timeout"
    OOM = "oom"
    DENIED = "denied"
    INVALID = "invalid"
    INVARIANT = "invariant"
    NO_PROGRESS = "no-progress"
    UNAVAILABLE = "unavailable"
    REJECTED = "rejected"


class RequestKind(enum.Enum):
    COMPACT = "compact"
    HANDOVER = "handover"


class LogLevel(enum.Enum):
    TRACE = "trace"
    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


# ---- entries -------------------------------------------------------------------------------


@dataclass
class Text:
    text: str


@dataclass
class Thinking:
    text: str


@dataclass
class ToolCall:
    id: str
    name: str
    #: JSON text of the arguments, exactly as the model wrote it.
    args: str


@dataclass
class ToolResult:
    call_id: str
    content: str
    is_error: bool = False
    #: Set when compaction set the original aside: its recovery URI (`artifact://<archive>/<n>`);
    #: ``content`` then holds a short placeholder.
    elided: str | None = None


@dataclass
class Image:
    #: A reference to an image (never the pixels).
    reference: str


@dataclass
class Placeholder:
    """Content set aside by compaction; ``uri`` recovers it."""

    text: str
    uri: str | None = None


Part = Text | Thinking | ToolCall | ToolResult | Image | Placeholder


@dataclass
class Entry:
    #: Stable host id. A replacement entry reuses the id of an entry it replaces, or leaves it
    #: empty for the host to assign; any other id is refused.
    id: str
    role: Role
    origin: Origin
    parts: list[Part] = field(default_factory=list)
    tokens: int = 0
    turn: int = 0
    pinned: bool = False


# ---- outlines: entries without their text (what `History.outlines` returns) ---------------


@dataclass
class TextOutline:
    #: UTF-8 bytes of the text.
    bytes: int


@dataclass
class ThinkingOutline:
    bytes: int


@dataclass
class ToolResultOutline:
    call_id: str
    #: UTF-8 bytes of the content; its tokens never exceed it.
    bytes: int
    is_error: bool = False
    elided: str | None = None


@dataclass
class ImageOutline:
    #: UTF-8 bytes of the reference.
    bytes: int


#: Tool calls and placeholders come whole: they are small, and what tool results pair with.
PartOutline = TextOutline | ThinkingOutline | ToolCall | ToolResultOutline | ImageOutline | Placeholder


@dataclass
class EntryOutline:
    id: str
    role: Role
    origin: Origin
    parts: list[PartOutline] = field(default_factory=list)
    #: The host's count for the whole entry.
    tokens: int = 0
    turn: int = 0
    pinned: bool = False


# ---- trigger -------------------------------------------------------------------------------


@dataclass
class Usage:
    #: None when the harness does not know: no automatic action is taken.
    context_tokens: int | None
    window: int
    reserve: int


@dataclass
class AgentRequest:
    """A compaction or handover the agent itself asked for."""

    kind: RequestKind
    preserve: str = ""
    resume: str = ""


@dataclass
class TriggerInput:
    usage: Usage
    turn: int
    turns_since_maintenance: int | None = None
    cooldown_left: int = 0
    pending_request: AgentRequest | None = None
    recent_outcomes: list[OutcomeClass] = field(default_factory=list)
    #: The plugin's configuration from the policy, as JSON text ("" when there is none).
    config: str = ""


@dataclass
class Advise:
    """Tell the agent something (e.g. that the context is filling up); no maintenance."""

    message: str


@dataclass
class Compact:
    reason: str


@dataclass
class Handover:
    reason: str


#: What a trigger decides; ``None`` (no action) is Python's own ``None``.
TriggerDecision = Advise | Compact | Handover


# ---- strategy ------------------------------------------------------------------------------


@dataclass
class CompactRequest:
    #: ``COMPACT`` keeps the verbatim tail; ``HANDOVER`` prepares a fresh session (no tail).
    purpose: RequestKind
    #: The archive this attempt writes into: artifact URIs and handover seeds name it.
    archive_id: str
    entries: list[Entry]
    #: Entries [0, protected_head) are the protected head (system prompt, pinned prefix).
    protected_head: int
    #: Entries [tail_start, len) are the verbatim recent tail, already at a safe boundary.
    tail_start: int
    #: Tokens the host would like the working context to shrink to.
    token_target: int = 0
    preserve: str | None = None
    resume: str | None = None
    #: The latest checkpoint JSON committed for this conversation, if any.
    previous_checkpoint: str | None = None
    #: The plugin's configuration from the policy, as JSON text ("" when there is none).
    config: str = ""
    #: The id of the last entry that checkpoint was made from, where the host knows it (the
    #: entries after it are new to the checkpoint). None from a host that does not send it.
    previous_checkpoint_through: str | None = None


@dataclass
class LentRequest:
    """The request as the host sends it (contract 0.2.0): a :class:`CompactRequest` without
    ``entries``; :meth:`Strategy.compact_lent` reads the conversation from its ``History``."""

    purpose: RequestKind
    archive_id: str
    protected_head: int
    tail_start: int
    token_target: int = 0
    preserve: str | None = None
    resume: str | None = None
    previous_checkpoint: str | None = None
    config: str = ""
    previous_checkpoint_through: str | None = None

    def with_entries(self, entries: list[Entry]) -> CompactRequest:
        """The :class:`CompactRequest` over ``entries`` (the whole conversation)."""
        return CompactRequest(
            self.purpose, self.archive_id, entries, self.protected_head, self.tail_start, self.token_target,
            self.preserve, self.resume, self.previous_checkpoint, self.config, self.previous_checkpoint_through,
        )


@dataclass
class EntryRange:
    """A contiguous run of entries, named by the ids of its first and last entry."""

    first: str
    last: str


@dataclass
class Original:
    """In a replacement: the conversation's entry at ``index``, unchanged. Only its index
    crosses back to the host."""

    index: int


#: One entry of a replacement: a new or changed :class:`Entry`, or an :class:`Original`.
ReplacementEntry = Entry | Original


@dataclass
class Outcome:
    replaced: EntryRange
    #: What ``compact`` returns holds whole entries: the SDK sends each one equal to the
    #: original of its id as an :class:`Original`. ``compact_lent`` may use :class:`Original` itself.
    replacement: list[ReplacementEntry]
    #: Typed continuation state, JSON text valid against `checkpoint.schema.json`.
    checkpoint: str | None = None
    #: For handover: the text that starts the next session.
    seed: str | None = None
    #: For handover: a look back at the session, kept in the archive.
    retrospective: str | None = None


# ---- commit policy -------------------------------------------------------------------------


@dataclass
class Boundary:
    turn: int
    turn_complete: bool
    tool_call_outstanding: bool
    config: str = ""


@dataclass
class Proposal:
    strategy: str
    tokens_before: int
    tokens_after: int
    replaced_ids: list[str] = field(default_factory=list)
    #: Ids in the kept range that are earlier compaction summaries.
    kept_summary_ids: list[str] = field(default_factory=list)


@dataclass
class Commit:
    pass


@dataclass
class Defer:
    reason: str


@dataclass
class Reject:
    reason: str


CommitDecision = Commit | Defer | Reject


# ---- capabilities --------------------------------------------------------------------------


@dataclass
class Message:
    """One message of a completion request: role "system", "user" or "assistant"."""

    role: str
    content: str


@dataclass
class ArchiveSummary:
    text: str
    truncated: bool


@dataclass
class EntrySlice:
    """Part of one archived entry's text; ``next_char_offset`` continues it."""

    index: int
    entry_id: str
    role: str
    text: str
    char_offset: int
    total_chars: int
    next_char_offset: int | None


@dataclass
class Page:
    archive_id: str
    entries: list[EntrySlice]
    total: int
    next_offset: int | None
    clamped: str | None


@dataclass
class Hit:
    archive_id: str
    index: int
    entry_id: str
    score: float
    snippet: str
    char_offset: int


@dataclass
class Hits:
    hits: list[Hit]
    total: int
    next_offset: int | None
    clamped: str | None


# ---- errors --------------------------------------------------------------------------------


class StrategyError(Exception):
    """Why a strategy returned no outcome; raise a subclass. ``message`` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Unavailable(StrategyError):
    """A capability the strategy needs is not there (e.g. no model configured)."""


class NothingToDo(StrategyError):
    """Nothing this strategy can do for this conversation."""


class Failed(StrategyError):
    """Anything else. An exception of another type raised by a strategy becomes this."""


class ModelError(Exception):
    """A completion failed; the subclass says how."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class ModelDenied(ModelError):
    """The policy does not grant `model` (possible only when the manifest lists it as optional)."""


class ModelUnavailable(ModelError):
    """No model is configured or reachable."""


class ModelTimeout(ModelError):
    """The model did not answer in time."""


class ModelFailed(ModelError):
    """The model answered with an error."""


class ArchiveError(Exception):
    """An archive call failed; the subclass says how."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ArchiveDenied(ArchiveError):
    """The policy does not grant this operation (`archive:read` / `archive:write`)."""


class ArchiveNotFound(ArchiveError):
    pass


class ArchiveInvalid(ArchiveError):
    pass


class ArchiveUnavailable(ArchiveError):
    pass
