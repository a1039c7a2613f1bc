"""Helpers plugin authors keep needing: token counts, safe cut points, placeholders, logging,
config loading, agent requests and the model-or-fallback switch. The same set as the Rust SDK
(`sdk/rust/src/helpers.rs`), with Python's conventions: errors are raised, not returned.
"""

from __future__ import annotations

import dataclasses
import json
import types as pytypes
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from . import host
from .rules import clip_chars, entry_text
from .types import (
    ArchiveDenied, ArchiveError, ArchiveUnavailable, Compact, CompactRequest, Entry,
    EntryRange, Failed, Handover, LogLevel, Message, ModelDenied, ModelError, ModelTimeout,
    NothingToDo, Origin, Outcome, RequestKind, Role, StrategyError, Text, ToolCall,
    TriggerInput, Unavailable,
)

__all__ = [
    "count_tokens", "recount", "tool_calls", "range_of", "changed_range_outcome",
    "message_text", "is_operator_message", "tail_chars", "clip_ellipsis",
    "log_trace", "log_debug", "log_info", "log_warn", "log_error",
    "parse_config", "config_or_defaults", "trigger_config",
    "pending_request_decision", "replaceable_range", "summary_entry", "summary_replacement",
    "ask_model", "ask_model_or_fallback", "model_unavailable", "store_artifact",
]

C = TypeVar("C")
T = TypeVar("T")


# ---- tokens and entries --------------------------------------------------------------------


def count_tokens(text: str) -> int:
    """Exact token count by the host's tokenizer (the ``tokens`` capability)."""
    return host.count(text)


def recount(entry: Entry) -> int:
    """Recounts an entry's tokens after its parts changed; returns the new count."""
    entry.tokens = count_tokens(entry_text(entry))
    return entry.tokens


def tool_calls(entries: Sequence[Entry]) -> dict[str, ToolCall]:
    """Every tool call in ``entries`` by its id (name and JSON arguments)."""
    return {part.id: part for entry in entries for part in entry.parts if isinstance(part, ToolCall)}


def range_of(entries: Sequence[Entry], first: int, last: int) -> EntryRange:
    """The range covering ``entries[first..=last]`` (both ends included, as in the WIT)."""
    return EntryRange(first=entries[first].id, last=entries[last].id)


def changed_range_outcome(entries: Sequence[Entry], changed: Mapping[int, Entry]) -> Outcome | None:
    """The outcome of editing some entries in place (``changed`` maps index → new entry): the
    range runs from the first to the last changed entry, and the entries in between come
    through verbatim with their ids, as the host requires. None when nothing changed."""
    if not changed:
        return None
    first, last = min(changed), max(changed)
    replacement = [changed.get(i, entries[i]) for i in range(first, last + 1)]
    return Outcome(replaced=range_of(entries, first, last), replacement=replacement)


def message_text(entry: Entry) -> str:
    """The text parts of an entry joined by newlines (no thinking, tool traffic or placeholders)."""
    return "\n".join(part.text for part in entry.parts if isinstance(part, Text))


def is_operator_message(entry: Entry) -> bool:
    """True for what the operator typed: intent that summaries must keep verbatim."""
    return entry.origin is Origin.OPERATOR and entry.role is Role.USER


def tail_chars(text: str, max_chars: int) -> str:
    """The last ``max_chars`` chars of ``text``."""
    return text[-max_chars:] if max_chars > 0 else ""


def clip_ellipsis(text: str, max_chars: int) -> str:
    """``text`` clipped to at most ``max_chars`` chars, ending in ``…`` when something was cut."""
    if len(text) <= max_chars:
        return text
    return clip_chars(text, max(max_chars - 1, 0)).rstrip() + "…"


# ---- logging -------------------------------------------------------------------------------
# Lines go to the host's `tracing` log tagged with the plugin (see them with CAIRN_LOG=info).
# print() goes nowhere: the sandbox has no stdout.


def log_trace(message: str) -> None:
    host.log(LogLevel.TRACE, message)


def log_debug(message: str) -> None:
    host.log(LogLevel.DEBUG, message)


def log_info(message: str) -> None:
    host.log(LogLevel.INFO, message)


def log_warn(message: str) -> None:
    host.log(LogLevel.WARN, message)


def log_error(message: str) -> None:
    host.log(LogLevel.ERROR, message)


# ---- configuration -------------------------------------------------------------------------


def parse_config(config_type: type[C], text: str) -> C:
    """The plugin's config as an instance of the dataclass ``config_type``.

    Empty text means all defaults (every field needs one). Keys are the field names; an
    unknown key or a value of the wrong type raises :class:`Failed` (``config: …``), as do
    ``ValueError``/``TypeError`` raised by the dataclass's ``__post_init__`` (check ranges
    there). Field types understood: bool, int, float (an int is accepted), str, ``X | None``,
    ``list[X]``, ``dict[str, X]``, ``Literal[...]``, nested dataclasses and ``Any``.
    """
    if not text.strip():
        return _construct(config_type, {}, "")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise Failed(f"config: not JSON: {e}") from None
    loaded: C = _convert(value, config_type, "")
    return loaded


def config_or_defaults(load: Callable[[], T], defaults: Callable[[], T]) -> T:
    """For plugins that have no error to return (triggers, commit policies): a broken config must
    not stop maintenance, so the error is logged as a warning and the defaults are used."""
    try:
        return load()
    except StrategyError as e:
        log_warn(f"{e.message}; using the defaults")
        return defaults()


def trigger_config(config_type: type[C], text: str) -> C:
    """A trigger's (or commit policy's) config as :func:`parse_config` reads it, or the
    defaults with a warning when it is broken."""
    return config_or_defaults(lambda: parse_config(config_type, text), config_type)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _found(value: Any) -> str:
    return json.dumps(value)[:60]


def _construct(config_type: type[C], values: dict[str, Any], path: str) -> C:
    try:
        return config_type(**values)
    except (ValueError, TypeError) as e:
        where = f" `{path}`" if path else ""
        raise Failed(f"config{where}: {e}") from None


def _convert(value: Any, tp: Any, path: str) -> Any:
    """``value`` (decoded JSON) checked against the type ``tp``; raises :class:`Failed`."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    where = f"`{path}`" if path else "the config"
    if tp is Any:
        return value
    if origin is typing.Union or origin is pytypes.UnionType:
        if value is None and type(None) in args:
            return None
        # The first member that reads the value; else the last member's complaint.
        complaint = Failed(f"config: invalid type for {where}: found {_found(value)}")
        for member in (a for a in args if a is not type(None)):
            try:
                return _convert(value, member, path)
            except Failed as e:
                complaint = e
        raise complaint
    if origin is typing.Literal:
        if value in args:
            return value
        raise Failed(f"config: invalid value for {where}: expected one of {', '.join(map(json.dumps, args))}, found {_found(value)}")
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            raise Failed(f"config: invalid type for {where}: expected an object, found {_found(value)}")
        fields = [f.name for f in dataclasses.fields(tp) if f.init]
        for key in value:
            if key not in fields:
                expected = ", ".join(f"`{name}`" for name in fields)
                raise Failed(f"config: unknown field `{_join(path, key)}`, expected one of {expected}")
        hints = typing.get_type_hints(tp)
        converted = {key: _convert(item, hints[key], _join(path, key)) for key, item in value.items()}
        return _construct(tp, converted, path)
    if origin in (list, Sequence) or tp is list:
        if not isinstance(value, list):
            raise Failed(f"config: invalid type for {where}: expected a list, found {_found(value)}")
        item_type = args[0] if args else Any
        return [_convert(item, item_type, f"{path}[{i}]") for i, item in enumerate(value)]
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, dict):
            raise Failed(f"config: invalid type for {where}: expected an object, found {_found(value)}")
        item_type = args[1] if len(args) == 2 else Any
        return {key: _convert(item, item_type, _join(path, key)) for key, item in value.items()}
    # JSON's true/false are Python bools, and bool is a subclass of int: keep them apart.
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    else:
        raise Failed(f"config: {where} has a type parse_config does not read: {_type_name(tp)}")
    raise Failed(f"config: invalid type for {where}: expected {_type_name(tp)}, found {_found(value)}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# ---- triggers ------------------------------------------------------------------------------


def pending_request_decision(request_input: TriggerInput, context: str | None = None) -> Compact | Handover | None:
    """The agent's pending request as a decision, ``compaction requested by the agent`` or
    ``handover requested by the agent``, with ``context`` (e.g. ``context at 63% of the window``)
    in parentheses when given. None when nothing is pending or a cooldown is still running: a
    request waits for the cooldown, like any automatic action."""
    request = request_input.pending_request
    if request_input.cooldown_left > 0 or request is None:
        return None
    at = f" ({context})" if context is not None else ""
    if request.kind is RequestKind.HANDOVER:
        return Handover(f"handover requested by the agent{at}")
    return Compact(f"compaction requested by the agent{at}")


# ---- strategies ----------------------------------------------------------------------------


def replaceable_range(request: CompactRequest) -> range:
    """Indices of the entries a strategy may replace: ``[protected_head, tail_start)`` (for a
    handover the host sets ``tail_start`` to the end). Empty → :class:`NothingToDo`."""
    first = request.protected_head
    end = min(request.tail_start, len(request.entries))
    if end <= first:
        raise NothingToDo("no entries between the protected head and the verbatim tail")
    return range(first, end)


def summary_entry(text: str) -> Entry:
    """A summary entry for the host to number: user role, ``summary`` origin, one text part."""
    return Entry(id="", role=Role.USER, origin=Origin.SUMMARY, parts=[Text(text)])


def summary_replacement(replaced: Sequence[Entry], text: str) -> list[Entry]:
    """A replacement for ``replaced``: one summary entry, then the range's pinned entries
    unchanged (the host refuses outcomes that drop or alter a pinned entry)."""
    return [summary_entry(text), *(entry for entry in replaced if entry.pinned)]


def ask_model(system: str, user: str, max_tokens: int) -> str:
    """One completion: a system prompt and a user message. Raises :class:`ModelError`."""
    return host.complete([Message("system", system), Message("user", user)], max_tokens)


def ask_model_or_fallback(system: str, user: str, max_tokens: int, fallback: str) -> str | None:
    """For strategies that hold ``model`` as optional: asks the model once. The reply when it
    answered; None when the policy does not grant ``model`` (logged as ``model not granted:
    {fallback}``, where ``fallback`` names the model-free way taken instead); any other model
    error raises :class:`Unavailable` (:func:`model_unavailable`), so the chain moves on."""
    try:
        return ask_model(system, user, max_tokens)
    except ModelDenied:
        log_info(f"model not granted: {fallback}")
        return None
    except ModelError as e:
        raise model_unavailable(e) from None


def model_unavailable(error: ModelError) -> Unavailable:
    """A model error as a strategy error: every kind means "no usable model here"."""
    if isinstance(error, ModelTimeout):
        return Unavailable("model timed out")
    kind = {"ModelDenied": "denied", "ModelUnavailable": "unavailable"}.get(type(error).__name__, "failed")
    return Unavailable(f"model {kind}: {error.message}")


def store_artifact(content: str) -> str:
    """Sets ``content`` aside in this compaction's archive (needs the ``archive:write`` grant)
    and returns its ``artifact://`` URI. A refused or unreachable archive raises
    :class:`Unavailable`, anything else :class:`Failed`."""
    try:
        return host.put_artifact(content)
    except ArchiveError as e:
        raise archive_write_error(e) from None


def archive_write_error(error: ArchiveError) -> StrategyError:
    """A failed archive write as a strategy error: refused or unreachable is
    :class:`Unavailable`, anything else :class:`Failed`."""
    if isinstance(error, (ArchiveDenied, ArchiveUnavailable)):
        return Unavailable(f"archive write: {error.message}")
    return Failed(f"archive write: {type(error).__name__}: {error.message}")
