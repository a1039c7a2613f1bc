"""Test a plugin in plain CPython: a fake host, entry builders, and the host's outcome checks.

    class MyTest(unittest.TestCase):
        def test_masks(self):
            entries = [system("be brief"), *tool_exchange("c1", "bash", '{"cmd":"ls"}', "x" * 2000), user("go on")]
            with FakeHost() as host:
                outcome = MyStrategy().compact(compact_request(entries, protected_head=1, tail_start=3))
            check_outcome(compact_request(entries, 1, 3), outcome)   # what the host would refuse
            self.assertEqual(len(host.artifacts), 1)

:class:`FakeHost` counts tokens with a rough rule (a token per 4 chars), not the host's
tokenizer: test *which* entries change, and use real numbers only through the host
(``cairn compact ... --json``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from types import TracebackType

from . import host as _host
from .conversation import lend
from .rules import entry_text
from .types import (
    ArchiveDenied, ArchiveNotFound, ArchiveSummary, CompactRequest, Entry, EntrySlice, Hit, Hits,
    LogLevel, Message, ModelError, ModelUnavailable, Origin, Original, Outcome, Page, Part,
    RequestKind, Role, Text, ToolCall, ToolResult,
)

__all__ = [
    "FakeHost", "approximate_tokens",
    "entry", "system", "user", "assistant", "tool_exchange", "compact_request", "lend",
    "OutcomeRefused", "check_outcome", "apply_outcome", "pairing_problems",
]

ModelReply = str | ModelError | Callable[[list[Message], int], str]


def approximate_tokens(text: str) -> int:
    """About one token per four chars: enough to test rules, not a tokenizer."""
    return (len(text) + 3) // 4


class FakeHost:
    """A host for tests: records log lines, counts tokens approximately, keeps artifacts in
    memory and answers completions from ``model``. Use it as a context manager; it installs
    itself for the capability calls made inside.

    ``model``: a reply string, a callable ``(messages, max_tokens) -> str``, or a
    :class:`ModelError` to raise (e.g. ``ModelDenied("not granted")``); by default there is no
    model (:class:`ModelUnavailable`). ``archive_write=False`` refuses artifacts, as a policy
    without ``archive:write`` does.
    """

    def __init__(
        self,
        *,
        tokens: Callable[[str], int] = approximate_tokens,
        model: ModelReply | None = None,
        archive_id: str = "a-test",
        archive_write: bool = True,
        summary: str = "",
    ) -> None:
        self.tokens = tokens
        self.model = model
        self.archive_id = archive_id
        self.archive_write = archive_write
        self.summary = summary
        self.logs: list[tuple[LogLevel, str]] = []
        #: URI → content of every artifact stored, in order.
        self.artifacts: dict[str, str] = {}
        #: Every completion request: (messages, max_tokens).
        self.completions: list[tuple[list[Message], int]] = []
        self._previous: list[_host.Host | None] = []

    def __enter__(self) -> FakeHost:
        self._previous.append(_host.set_host(self))
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        _host.set_host(self._previous.pop())

    def messages(self, level: LogLevel | None = None) -> list[str]:
        """The logged lines, at ``level`` or all."""
        return [m for lv, m in self.logs if level is None or lv is level]

    # -- Host --

    def log(self, level: LogLevel, message: str) -> None:
        self.logs.append((level, message))

    def count_tokens(self, text: str) -> int:
        return self.tokens(text)

    def complete(self, messages: list[Message], max_tokens: int) -> str:
        self.completions.append((messages, max_tokens))
        match self.model:
            case None:
                raise ModelUnavailable("no model in this test host")
            case ModelError() as error:
                raise error
            case str() as reply:
                return reply
            case reply:
                return reply(messages, max_tokens)

    def read_summary(self) -> ArchiveSummary:
        return ArchiveSummary(self.summary, False)

    def search(self, query: str, offset: int, limit: int) -> Hits:
        found = [
            Hit(self.archive_id, n, uri, 1.0, content[:200], content.lower().index(query.lower()))
            for n, (uri, content) in enumerate(self.artifacts.items())
            if query.lower() in content.lower()
        ]
        page = found[offset : offset + limit]
        more = offset + len(page)
        return Hits(page, len(found), more if more < len(found) else None, None)

    def page_entries(self, archive_id: str, offset: int, limit: int, char_offset: int) -> Page:
        if archive_id != self.archive_id:
            raise ArchiveNotFound(f"no archive {archive_id}")
        stored = list(self.artifacts.items())
        slices = [
            EntrySlice(n, uri, "tool", content[char_offset if n == offset else 0 :], char_offset if n == offset else 0, len(content), None)
            for n, (uri, content) in itertools.islice(enumerate(stored), offset, offset + limit)
        ]
        more = offset + len(slices)
        return Page(archive_id, slices, len(stored), more if more < len(stored) else None, None)

    def put_artifact(self, content: str) -> str:
        if not self.archive_write:
            raise ArchiveDenied("archive:write is not granted")
        uri = f"artifact://{self.archive_id}/{len(self.artifacts) + 1}"
        self.artifacts[uri] = content
        return uri


# ---- building entries ----------------------------------------------------------------------

_ids = itertools.count(1)


def entry(role: Role, origin: Origin, *parts: Part, id: str | None = None, pinned: bool = False, turn: int = 0) -> Entry:  # noqa: A002
    """An entry with a fresh id (``e1``, ``e2``, …) and its approximate token count."""
    made = Entry(id=id or f"e{next(_ids)}", role=role, origin=origin, parts=list(parts), turn=turn, pinned=pinned)
    made.tokens = approximate_tokens(entry_text(made))
    return made


def system(text: str, **kw: object) -> Entry:
    return entry(Role.SYSTEM, Origin.HARNESS, Text(text), **kw)  # type: ignore[arg-type]


def user(text: str, **kw: object) -> Entry:
    """What the operator typed."""
    return entry(Role.USER, Origin.OPERATOR, Text(text), **kw)  # type: ignore[arg-type]


def assistant(text: str, **kw: object) -> Entry:
    return entry(Role.ASSISTANT, Origin.AGENT, Text(text), **kw)  # type: ignore[arg-type]


def tool_exchange(call_id: str, name: str, args: str, output: str, *, is_error: bool = False) -> list[Entry]:
    """An assistant entry calling ``name`` and the tool entry answering it."""
    return [
        entry(Role.ASSISTANT, Origin.AGENT, ToolCall(call_id, name, args)),
        entry(Role.TOOL, Origin.TOOL, ToolResult(call_id, output, is_error)),
    ]


def compact_request(
    entries: Sequence[Entry], protected_head: int = 0, tail_start: int | None = None, *, config: str = "", archive_id: str = "a-test"
) -> CompactRequest:
    """A compaction request over ``entries``; the tail starts at the end unless given."""
    return CompactRequest(
        purpose=RequestKind.COMPACT,
        archive_id=archive_id,
        entries=list(entries),
        protected_head=protected_head,
        tail_start=len(entries) if tail_start is None else tail_start,
        token_target=sum(e.tokens for e in entries) // 2,
        config=config,
    )


# ---- the host's checks ---------------------------------------------------------------------


class OutcomeRefused(AssertionError):
    """The host would refuse this outcome; the message says why, as the host would."""


def apply_outcome(request: CompactRequest, outcome: Outcome) -> list[Entry]:
    """The working context after ``outcome``, checked as the host checks it
    (`host/cairn/src/chain/invariants.rs`): the range is known, in order and inside the
    replaceable window; replacement ids are empty or reuse an id of the range, once; pinned
    entries come through unchanged; tool-call pairing breaks nowhere it was not broken before.
    An :class:`Original` stands for the request's entry at its index, as the host reads it.
    Raises :class:`OutcomeRefused`."""
    entries = request.entries
    index = {e.id: i for i, e in enumerate(entries)}
    replacement: list[Entry] = []
    for r in outcome.replacement:
        if isinstance(r, Original):
            if not 0 <= r.index < len(entries):
                raise OutcomeRefused(f"the replacement names original entry {r.index}; the conversation has {len(entries)}")
            r = entries[r.index]
        replacement.append(r)
    if outcome.replaced.first not in index or outcome.replaced.last not in index:
        raise OutcomeRefused(f"the replaced range names an unknown entry id ({outcome.replaced})")
    first, last = index[outcome.replaced.first], index[outcome.replaced.last]
    if first > last:
        raise OutcomeRefused(f"the replaced range is reversed ({outcome.replaced.first} after {outcome.replaced.last})")
    if first < request.protected_head:
        raise OutcomeRefused(f"the replaced range starts inside the protected head (entry {entries[first].id})")
    if last >= request.tail_start:
        raise OutcomeRefused(f"the replaced range reaches into the verbatim tail (entry {entries[last].id})")
    reused: set[str] = set()
    for e in replacement:
        if not e.id:
            continue
        if not (first <= index.get(e.id, -1) <= last):
            raise OutcomeRefused(f"the replacement invents entry id {e.id!r}")
        if e.id in reused:
            raise OutcomeRefused(f"the replacement uses entry id {e.id!r} twice")
        reused.add(e.id)
    if any(e.pinned and e.id not in reused for e in replacement):
        raise OutcomeRefused("a new replacement entry claims to be pinned")
    for pinned in (e for e in entries[first : last + 1] if e.pinned):
        if not any(r.id == pinned.id and r.parts == pinned.parts and r.pinned for r in replacement):
            raise OutcomeRefused(f"the outcome drops or changes pinned entry {pinned.id}")
    context = [*entries[:first], *replacement, *entries[last + 1 :]]
    broken = sorted(pairing_problems(context) - pairing_problems(entries))
    if broken:
        raise OutcomeRefused(f"the outcome breaks tool-call pairing: {broken[0]}")
    return context


def check_outcome(request: CompactRequest, outcome: Outcome, tokens: Callable[[str], int] = approximate_tokens) -> tuple[int, int]:
    """:func:`apply_outcome`, and the context must shrink (the host's no-progress rule);
    returns (tokens before, tokens after) as ``tokens`` counts them."""
    context = apply_outcome(request, outcome)
    before = sum(tokens(entry_text(e)) for e in request.entries)
    after = sum(tokens(entry_text(e)) for e in context)
    if after >= before:
        raise OutcomeRefused(f"the outcome does not shrink the context ({before} → {after} tokens)")
    return before, after


def pairing_problems(entries: Sequence[Entry]) -> set[str]:
    """Every way tool calls and results fail to pair up (the host's rule, compared before and
    after an outcome so a plugin is blamed only for what it broke)."""
    problems: set[str] = set()

    def calls(e: Entry) -> list[str]:
        return [p.id for p in e.parts if isinstance(p, ToolCall)]

    def results(e: Entry) -> list[str]:
        return [p.call_id for p in e.parts if isinstance(p, ToolResult)]

    answered_at: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        for call_id in results(e):
            answered_at.setdefault(call_id, []).append(i)
    for i, e in enumerate(entries):
        if not calls(e):
            continue
        block_end = i + 1
        while block_end < len(entries) and results(entries[block_end]):
            block_end += 1
        for call_id in calls(e):
            later = next((p for p in answered_at.get(call_id, []) if p > i), None)
            if later is not None and later >= block_end:
                problems.add(f"the result of tool call {call_id} does not directly follow it")
    open_calls: set[str] = set()
    seen: set[str] = set()
    answered: set[str] = set()
    for e in entries:
        for call_id in results(e):
            if call_id in open_calls:
                open_calls.remove(call_id)
            elif call_id in answered:
                problems.add(f"tool call {call_id} is answered twice")
            else:
                problems.add(f"tool result {call_id} has no earlier tool call")
            answered.add(call_id)
        for call_id in calls(e):
            if call_id in seen:
                problems.add(f"tool call id {call_id} is used twice")
            seen.add(call_id)
            open_calls.add(call_id)
    problems.update(f"tool call {call_id} has no result" for call_id in open_calls)
    return problems
