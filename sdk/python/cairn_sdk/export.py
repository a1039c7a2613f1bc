"""The edge between componentize-py's generated bindings (module ``wit_world``) and the SDK.

``app.py`` ends with one line, e.g. ``WitWorld = export_strategy(MyStrategy)``: componentize-py
instantiates ``app.WitWorld`` and calls its export. The wrapper installs the host that answers
capability calls through the WIT imports, converts the generated dataclasses to the SDK's own
types and back (a strategy's lent ``history`` becomes a :class:`History` that asks the host;
:meth:`Strategy.compact_lent` reads it), and maps errors:

* strategy (has an error channel): a :class:`StrategyError` becomes its WIT case; any other
  exception becomes ``failed("<Type>: <message> (at file:line)")`` and is logged with its stack,
  so a bug in a plugin is a typed, reported error, never a trap;
* trigger and commit policy (no error channel): the exception is logged with its stack and
  re-raised, so the call traps and the host falls back to its own rule and reports it.

This is the only module that knows the generated code. It imports it at import time on
purpose: componentize-py snapshots the interpreter after importing ``app`` at build time, and
a module first imported at run time is not found (the sandbox has no files). In plain CPython
there is no ``wit_world``: importing works, the exported class just cannot be called.
"""

from __future__ import annotations

import importlib
from types import ModuleType, TracebackType
from typing import Any

from . import host as _host
from .conversation import History
from .helpers import archive_write_error
from .plugin import CommitPolicy, Strategy, Trigger
from .types import (
    Advise, AgentRequest, ArchiveDenied, ArchiveError, ArchiveInvalid, ArchiveNotFound,
    ArchiveSummary, ArchiveUnavailable, Boundary, Commit, CommitDecision, Compact, Defer, Entry,
    EntryOutline, EntrySlice, Handover, Hit, Hits, Image, ImageOutline, LentRequest, LogLevel,
    Message, ModelDenied, ModelError, ModelFailed, ModelTimeout, ModelUnavailable, NothingToDo,
    Origin, Original, Outcome, OutcomeClass, Page, Part, PartOutline, Placeholder, Proposal,
    Reject, RequestKind, Role, StrategyError, Text, TextOutline, Thinking, ThinkingOutline,
    ToolCall, ToolResult, ToolResultOutline, TriggerDecision, TriggerInput, Unavailable, Usage,
)

__all__ = ["export_strategy", "export_trigger", "export_commit_policy"]


def _import(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# Present only inside a componentize-py build (or a test that generated the bindings); which
# capability modules exist depends on the world. Typed `Any`: the generated code is not there
# to type-check against, and this module is its only reader.
_world: Any = _import("wit_world")
_wt: Any = _import("wit_world.imports.types")
_wlog: Any = _import("wit_world.imports.log")
_wtokens: Any = _import("wit_world.imports.tokens")
_wmodel: Any = _import("wit_world.imports.model")
_warchive: Any = _import("wit_world.imports.archive")
_cpt: Any = _import("componentize_py_types")


def _world_base() -> type:
    return _world.WitWorld if _world is not None else object


def _world_export(name: str) -> Any:
    return getattr(_world.WitWorld, name, None) if _world is not None else None


# ---- the exported classes ------------------------------------------------------------------


def export_strategy(plugin: type[Strategy]) -> type:
    """The ``WitWorld`` class of a ``strategy`` component whose work ``plugin`` does."""
    _check_world(plugin, Strategy, "compact", 3, "strategy")

    class WitWorld(_world_base()):  # type: ignore[misc]
        def compact(self, history: Any, request: Any) -> Any:
            previous = _host.set_host(_WIT_HOST)
            try:
                outcome = plugin().compact_lent(_WitHistory(history), _lent_request(request))
                if not isinstance(outcome, Outcome):
                    raise TypeError(f"compact returned {type(outcome).__name__}, not an Outcome")
                return _outcome_to_wit(outcome)
            except StrategyError as e:
                raise _cpt.Err(_strategy_error_to_wit(e)) from None
            except Exception as e:  # noqa: BLE001 - the point: any bug becomes a typed error
                _log_exception(plugin, e)
                raise _cpt.Err(_wt.StrategyError_Failed(_describe(e))) from None
            finally:
                _host.set_host(previous)

    WitWorld.__qualname__ = f"WitWorld[{plugin.__name__}]"
    return WitWorld


def export_trigger(plugin: type[Trigger]) -> type:
    """The ``WitWorld`` class of a ``trigger`` component whose work ``plugin`` does."""
    _check_world(plugin, Trigger, "decide", 2, "trigger")

    class WitWorld(_world_base()):  # type: ignore[misc]
        def decide(self, input: Any) -> Any:  # noqa: A002 - the WIT's name
            previous = _host.set_host(_WIT_HOST)
            try:
                return _trigger_decision_to_wit(plugin().decide(_trigger_input(input)))
            except Exception as e:
                _log_exception(plugin, e)
                raise  # no error channel: trap, and the host falls back to its own rule
            finally:
                _host.set_host(previous)

    WitWorld.__qualname__ = f"WitWorld[{plugin.__name__}]"
    return WitWorld


def export_commit_policy(plugin: type[CommitPolicy]) -> type:
    """The ``WitWorld`` class of a ``commit-policy`` component whose work ``plugin`` does."""
    _check_world(plugin, CommitPolicy, "decide", 3, "commit-policy")

    class WitWorld(_world_base()):  # type: ignore[misc]
        def decide(self, boundary: Any, proposal: Any) -> Any:
            previous = _host.set_host(_WIT_HOST)
            try:
                decision = plugin().decide(_boundary(boundary), _proposal(proposal))
                return _commit_decision_to_wit(decision)
            except Exception as e:
                _log_exception(plugin, e)
                raise  # no error channel: trap, and the host falls back to its own rule
            finally:
                _host.set_host(previous)

    WitWorld.__qualname__ = f"WitWorld[{plugin.__name__}]"
    return WitWorld


def _check_world(plugin: type, base: type, export: str, arity: int, world: str) -> None:
    """Fails the build (it runs when componentize-py imports ``app``) when the plugin or the
    world it is built for (``-w``) do not match the exporter."""
    if not (isinstance(plugin, type) and issubclass(plugin, base)):
        raise TypeError(f"export_{world.replace('-', '_')} takes a subclass of cairn_sdk.{base.__name__}, not {plugin!r}")
    if _world is None:
        return
    method = _world_export(export)  # `arity` counts `self`, as the generated method does
    if method is None or method.__code__.co_argcount != arity:
        raise TypeError(f"this component is not built for the `{world}` world of cairn:compaction@0.2.0: pass `-w {world}` and that WIT to componentize-py")


# ---- errors --------------------------------------------------------------------------------


def _describe(error: BaseException) -> str:
    """``ValueError: bad value (at app.py:12)``: what and where, for the step's record."""
    frame = _innermost(error.__traceback__)
    where = f" (at {_short(frame.tb_frame.f_code.co_filename)}:{frame.tb_lineno})" if frame else ""
    return f"{type(error).__name__}: {error}{where}"


def _innermost(tb: TracebackType | None) -> TracebackType | None:
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb


def _short(filename: str) -> str:
    """``app.py``, ``cairn_sdk/helpers.py``: where the component's build put a file is noise."""
    name = filename.rsplit("/", 1)[-1]
    return f"cairn_sdk/{name}" if "/cairn_sdk/" in filename else name


def _log_exception(plugin: type, error: BaseException) -> None:
    # Walks the traceback by hand: the `traceback` module reads source files, which the sandbox has not.
    frames = []
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename != __file__:  # the wrapper's own frame says nothing
            frames.append(f"{_short(code.co_filename)}:{tb.tb_lineno} in {code.co_name}")
        tb = tb.tb_next
    try:
        _host.log(LogLevel.ERROR, f"{plugin.__name__} raised {type(error).__name__}: {error}\n  " + "\n  ".join(frames))
    except Exception:  # noqa: BLE001 - logging must never hide the original error
        pass


def _strategy_error_to_wit(error: StrategyError) -> Any:
    if isinstance(error, Unavailable):
        return _wt.StrategyError_Unavailable(error.message)
    if isinstance(error, NothingToDo):
        return _wt.StrategyError_NothingToDo(error.message)
    return _wt.StrategyError_Failed(error.message)


# ---- WIT → SDK -----------------------------------------------------------------------------


def _part(part: Any) -> Part:
    value = part.value
    if isinstance(part, _wt.Part_Text):
        return Text(value)
    if isinstance(part, _wt.Part_ToolResult):
        return ToolResult(value.call_id, value.content, value.is_error, value.elided)
    if isinstance(part, _wt.Part_ToolCall):
        return ToolCall(value.id, value.name, value.args)
    if isinstance(part, _wt.Part_Thinking):
        return Thinking(value)
    if isinstance(part, _wt.Part_Image):
        return Image(value)
    if isinstance(part, _wt.Part_Placeholder):
        return Placeholder(value.text, value.uri)
    raise TypeError(f"unknown part {type(part).__name__}")


def _entry(entry: Any) -> Entry:
    return Entry(
        id=entry.id,
        role=Role[entry.role.name],
        origin=Origin[entry.origin.name],
        parts=[_part(p) for p in entry.parts],
        tokens=entry.tokens,
        turn=entry.turn,
        pinned=entry.pinned,
    )


def _part_outline(part: Any) -> PartOutline:
    value = part.value
    if isinstance(part, _wt.PartOutline_Text):
        return TextOutline(value)
    if isinstance(part, _wt.PartOutline_ToolResult):
        return ToolResultOutline(value.call_id, value.bytes, value.is_error, value.elided)
    if isinstance(part, _wt.PartOutline_ToolCall):
        return ToolCall(value.id, value.name, value.args)
    if isinstance(part, _wt.PartOutline_Thinking):
        return ThinkingOutline(value)
    if isinstance(part, _wt.PartOutline_Image):
        return ImageOutline(value)
    if isinstance(part, _wt.PartOutline_Placeholder):
        return Placeholder(value.text, value.uri)
    raise TypeError(f"unknown part outline {type(part).__name__}")


def _entry_outline(o: Any) -> EntryOutline:
    return EntryOutline(o.id, Role[o.role.name], Origin[o.origin.name], [_part_outline(p) for p in o.parts], o.tokens, o.turn, o.pinned)


def _lent_request(r: Any) -> LentRequest:
    return LentRequest(
        purpose=RequestKind[r.purpose.name],
        archive_id=r.archive_id,
        protected_head=r.protected_head,
        tail_start=r.tail_start,
        token_target=r.token_target,
        preserve=r.preserve,
        resume=r.resume,
        previous_checkpoint=r.previous_checkpoint,
        config=r.config,
        # Read only if this WIT has it: the SDK builds against either shape of the request.
        previous_checkpoint_through=getattr(r, "previous_checkpoint_through", None),
    )


def _trigger_input(i: Any) -> TriggerInput:
    request = i.pending_request
    return TriggerInput(
        usage=Usage(i.usage.context_tokens, i.usage.window, i.usage.reserve),
        turn=i.turn,
        turns_since_maintenance=i.turns_since_maintenance,
        cooldown_left=i.cooldown_left,
        pending_request=AgentRequest(RequestKind[request.kind.name], request.preserve, request.resume) if request else None,
        recent_outcomes=[OutcomeClass[o.name] for o in i.recent_outcomes],
        config=i.config,
    )


def _boundary(b: Any) -> Boundary:
    return Boundary(b.turn, b.turn_complete, b.tool_call_outstanding, b.config)


def _proposal(p: Any) -> Proposal:
    return Proposal(p.strategy, p.tokens_before, p.tokens_after, list(p.replaced_ids), list(p.kept_summary_ids))


# ---- SDK → WIT -----------------------------------------------------------------------------


def _part_to_wit(part: Part) -> Any:
    match part:
        case Text(text):
            return _wt.Part_Text(text)
        case ToolResult(call_id, content, is_error, elided):
            return _wt.Part_ToolResult(_wt.ToolResult(call_id, content, is_error, elided))
        case ToolCall(id, name, args):
            return _wt.Part_ToolCall(_wt.ToolCall(id, name, args))
        case Thinking(text):
            return _wt.Part_Thinking(text)
        case Image(reference):
            return _wt.Part_Image(reference)
        case Placeholder(text, uri):
            return _wt.Part_Placeholder(_wt.Placeholder(text, uri))
    raise TypeError(f"an entry part must be Text, Thinking, ToolCall, ToolResult, Image or Placeholder, not {type(part).__name__}")


def _entry_to_wit(e: Entry) -> Any:
    if not isinstance(e, Entry):
        raise TypeError(f"a replacement must hold Entry or Original objects, not {type(e).__name__}")
    return _wt.Entry(
        e.id, _wt.Role[e.role.name], _wt.Origin[e.origin.name], [_part_to_wit(p) for p in e.parts], e.tokens, e.turn, e.pinned
    )


def _replacement_to_wit(r: Entry | Original) -> Any:
    if isinstance(r, Original):
        return _wt.ReplacementEntry_Original(r.index)
    return _wt.ReplacementEntry_Entry(_entry_to_wit(r))


def _outcome_to_wit(o: Outcome) -> Any:
    return _wt.Outcome(
        _wt.EntryRange(o.replaced.first, o.replaced.last),
        [_replacement_to_wit(r) for r in o.replacement],
        o.checkpoint,
        o.seed,
        o.retrospective,
    )


def _trigger_decision_to_wit(d: TriggerDecision | None) -> Any:
    match d:
        case None:
            return _wt.TriggerDecision_None_()
        case Advise(message):
            return _wt.TriggerDecision_Advise(message)
        case Compact(reason):
            return _wt.TriggerDecision_Compact(reason)
        case Handover(reason):
            return _wt.TriggerDecision_Handover(reason)
    raise TypeError(f"decide must return None, Advise, Compact or Handover, not {type(d).__name__}")


def _commit_decision_to_wit(d: CommitDecision) -> Any:
    match d:
        case Commit():
            return _wt.CommitDecision_Commit()
        case Defer(reason):
            return _wt.CommitDecision_Defer(reason)
        case Reject(reason):
            return _wt.CommitDecision_Reject(reason)
    raise TypeError(f"decide must return Commit, Defer or Reject, not {type(d).__name__}")


# ---- the host that calls the WIT imports ---------------------------------------------------


class _WitHistory(History):
    """The host's lent conversation: each call crosses to the host, which keeps the text."""

    def __init__(self, history: Any) -> None:
        super().__init__()
        self._history = history

    def len(self) -> int:
        return int(self._history.len())

    def entries(self, start: int = 0, end: int | None = None) -> list[Entry]:
        return [_entry(e) for e in self._history.entries(*self._range(start, end))]

    def outlines(self, start: int = 0, end: int | None = None) -> list[EntryOutline]:
        return [_entry_outline(o) for o in self._history.outlines(*self._range(start, end))]

    def part_text(self, index: int, part: int) -> str | None:
        return self._history.part_text(index, part) if index >= 0 and part >= 0 else None

    def part_tokens(self, index: int, part: int) -> int | None:
        return self._history.part_tokens(index, part) if index >= 0 and part >= 0 else None

    def set_aside(self, index: int, part: int) -> str:
        try:
            return str(self._history.set_aside(index, part))
        except _cpt.Err as e:
            raise archive_write_error(_archive_error(e.value)) from None

    def _range(self, start: int, end: int | None) -> tuple[int, int]:
        # u32 on the wire: the host clamps the end, negatives would not convert.
        high = 0xFFFF_FFFF
        return min(max(start, 0), high), high if end is None else min(max(end, 0), high)


class _WitHost:
    """Answers capability calls through the component's imports."""

    def log(self, level: LogLevel, message: str) -> None:
        _wlog.log(_wlog.Level[level.name], message)

    def count_tokens(self, text: str) -> int:
        return int(_needs(_wtokens, "tokens").count(text))

    def complete(self, messages: list[Message], max_tokens: int) -> str:
        model = _needs(_wmodel, "model")
        request = model.CompletionRequest([model.Message(m.role, m.content) for m in messages], max_tokens)
        try:
            return str(model.complete(request))
        except _cpt.Err as e:
            raise _model_error(e.value) from None

    def read_summary(self) -> ArchiveSummary:
        s = _archive_call("read_summary")
        return ArchiveSummary(s.text, s.truncated)

    def search(self, query: str, offset: int, limit: int) -> Hits:
        h = _archive_call("search", query, offset, limit)
        hits = [Hit(x.archive_id, x.index, x.entry_id, x.score, x.snippet, x.char_offset) for x in h.hits]
        return Hits(hits, h.total, h.next_offset, h.clamped)

    def page_entries(self, archive_id: str, offset: int, limit: int, char_offset: int) -> Page:
        p = _archive_call("page_entries", archive_id, offset, limit, char_offset)
        slices = [EntrySlice(s.index, s.entry_id, s.role, s.text, s.char_offset, s.total_chars, s.next_char_offset) for s in p.entries]
        return Page(p.archive_id, slices, p.total, p.next_offset, p.clamped)

    def put_artifact(self, content: str) -> str:
        return str(_archive_call("put_artifact", content))


def _needs(module: Any, capability: str) -> Any:
    if module is None:
        raise RuntimeError(f"the `{capability}` capability is not part of this plugin's world (only strategies have it)")
    return module


def _archive_call(name: str, *args: Any) -> Any:
    archive = _needs(_warchive, "archive")
    try:
        return getattr(archive, name)(*args)
    except _cpt.Err as e:
        raise _archive_error(e.value) from None


def _model_error(error: Any) -> ModelError:
    kinds: dict[str, type[ModelError]] = {
        "ModelError_Denied": ModelDenied,
        "ModelError_Unavailable": ModelUnavailable,
        "ModelError_Timeout": ModelTimeout,
        "ModelError_Failed": ModelFailed,
    }
    kind = kinds.get(type(error).__name__, ModelFailed)
    return kind(getattr(error, "value", None) or "")


def _archive_error(error: Any) -> ArchiveError:
    kinds: dict[str, type[ArchiveError]] = {
        "ArchiveError_Denied": ArchiveDenied,
        "ArchiveError_NotFound": ArchiveNotFound,
        "ArchiveError_Invalid": ArchiveInvalid,
        "ArchiveError_Unavailable": ArchiveUnavailable,
        # The lent history's set-aside answers with its own variant.
        "SetAsideError_Denied": ArchiveDenied,
        "SetAsideError_NotFound": ArchiveNotFound,
        "SetAsideError_TooLarge": ArchiveInvalid,
    }
    return kinds.get(type(error).__name__, ArchiveInvalid)(str(error.value))


_WIT_HOST = _WitHost()
