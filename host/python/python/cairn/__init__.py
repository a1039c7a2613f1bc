"""Cairn in-process: sandboxed, swappable, auditable context compaction for agent harnesses.

A `Host` runs Cairn's harness API in this process (the engine is the extension module
`cairn._cairn`, the same code as the `cairn` command this package also installs)::

    import cairn

    host = cairn.Host()                       # the embedded default policy, ~/.local/share/cairn
    answer = host.compact("my-session", messages)   # OpenAI chat messages, say
    messages = answer["transcript"]           # the compacted context, in the shape you sent

Messages go in as a transcript in any format Cairn reads: a list of OpenAI chat messages, an
Anthropic Messages body (``{"system": …, "messages": […]}``), or the text of any session file
(Pi, Claude Code, Codex, Gemini CLI, OpenCode, Cairn JSONL). The answer's ``transcript`` comes
back in the same shape: a list or dict for a list or dict, text for text.

Every failure is a `CairnError` subclass by its stable code: `Diverged` (send the whole history
once), `NotFound`, `InvalidRequest`, `TranscriptInvalid`, `Refused`, `Forbidden`,
`Unavailable`, `Internal`; opening a host raises `PolicyInvalid`, `PluginsInvalid` or
`HomeUnavailable`. The GIL is released while Cairn works: one host serves many threads, and
`AsyncHost` offers the same operations as coroutines.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from . import _cairn

__all__ = [
    "Host",
    "AsyncHost",
    "CairnError",
    "InvalidRequest",
    "Forbidden",
    "NotFound",
    "Diverged",
    "TranscriptInvalid",
    "Refused",
    "Unavailable",
    "Internal",
    "PolicyInvalid",
    "PluginsInvalid",
    "HomeUnavailable",
    "OPERATIONS",
    "__version__",
]

__version__: str = _cairn.VERSION
OPERATIONS: Sequence[str] = tuple(_cairn.OPERATIONS)

Messages = Union[str, List[Dict[str, Any]], Dict[str, Any]]
PathLike = Union[str, "os.PathLike[str]"]


class CairnError(Exception):
    """A failed Cairn call. ``code`` is the stable machine code; the message says what."""

    code: str = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(CairnError):
    """The request itself is wrong: a missing or conflicting argument, a bad key or format."""

    code = "invalid-request"


class Forbidden(CairnError):
    """The caller may not do this here."""

    code = "forbidden"


class NotFound(CairnError):
    """The conversation, compaction, artifact or entry named does not exist."""

    code = "not-found"


class Diverged(CairnError):
    """An incremental call (``since``) the record cannot follow: send the whole history once."""

    code = "diverged"


class TranscriptInvalid(CairnError):
    """The transcript could not be read; the message names the line."""

    code = "transcript-invalid"


class Refused(CairnError):
    """The conversation's state refuses a well-formed call (nothing to undo, a pin over budget)."""

    code = "refused"


class Unavailable(CairnError):
    """The host has no plugins and policy to run on."""

    code = "unavailable"


class Internal(CairnError):
    """Anything else: storage, I/O, a bug. The message says what."""

    code = "internal"


class PolicyInvalid(CairnError):
    """The policy file could not be read or fails its checks (the message names file:line:column)."""

    code = "policy-invalid"


class PluginsInvalid(CairnError):
    """A plugin directory could not be loaded (the message names the plugin)."""

    code = "plugins-invalid"


class HomeUnavailable(CairnError):
    """The home could not be opened."""

    code = "home-unavailable"


_BY_CODE = {cls.code: cls for cls in CairnError.__subclasses__()}


def _raised(error: _cairn.HarnessError) -> CairnError:
    code, message = error.args
    return _BY_CODE.get(code, Internal)(message)


def _text(messages: Messages) -> str:
    return messages if isinstance(messages, str) else json.dumps(messages)


def _shaped(answer: Dict[str, Any], sent: Optional[Messages]) -> Dict[str, Any]:
    """The answer's transcript in the shape the caller sent (a list or dict back for one)."""
    text = answer.get("transcript")
    if sent is not None and not isinstance(sent, str) and isinstance(text, str) and text:
        answer["transcript"] = json.loads(text)
    return answer


def _dropped_none(fields: Dict[str, Any]) -> Dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


class Host:
    """A Cairn host in this process: its plugins compiled once, its policy, its home.

    ``home`` defaults to ``$CAIRN_HOME``, else ``~/.local/share/cairn`` (a ``postgres://`` URL
    is a PostgreSQL record); ``policy`` is a TOML policy file (the embedded default when None);
    ``plugin_dirs`` add plugins beside the bundled ones. Safe to share between threads.
    """

    def __init__(self, home: Optional[PathLike] = None, policy: Optional[PathLike] = None, plugin_dirs: Iterable[PathLike] = ()) -> None:
        try:
            self._host = _cairn.Host(
                None if home is None else os.fspath(home),
                None if policy is None else os.fspath(policy),
                [os.fspath(d) for d in plugin_dirs],
            )
        except _cairn.HarnessError as error:
            raise _raised(error) from None

    def call(self, operation: str, request: Dict[str, Any]) -> Dict[str, Any]:
        """Any operation by name (`OPERATIONS`, the names of ``cairn serve``'s tools), its
        request as a dict; the answer as a dict."""
        try:
            answer: Dict[str, Any] = json.loads(self._host.call(operation, json.dumps(request)))
            return answer
        except _cairn.HarnessError as error:
            raise _raised(error) from None

    def compact(
        self,
        conversation: str,
        messages: Messages,
        *,
        window: Optional[int] = None,
        budget: Optional[int] = None,
        preserve: Optional[str] = None,
        resume: Optional[str] = None,
        dry_run: bool = False,
    ) -> Dict[str, Any]:
        """Compacts ``messages`` now under the policy and records it: the report, and the new
        context as ``transcript`` in the shape sent."""
        request = _dropped_none(dict(conversation=conversation, transcript=_text(messages), window=window, budget=budget, preserve=preserve, resume=resume, dry_run=dry_run))
        return _shaped(self.call("compact", request), messages)

    def handover(self, conversation: str, messages: Messages, *, preserve: Optional[str] = None, resume: Optional[str] = None) -> Dict[str, Any]:
        """Archives the conversation and answers the seed of a fresh session."""
        request = _dropped_none(dict(conversation=conversation, transcript=_text(messages), preserve=preserve, resume=resume))
        return _shaped(self.call("handover", request), messages)

    def boundary(
        self,
        conversation: str,
        messages: Messages,
        *,
        turn: int,
        window: int,
        reserve: Optional[int] = None,
        since: Optional[str] = None,
        format: Optional[str] = None,
        usage: Optional[Dict[str, Any]] = None,
        tool_call_outstanding: bool = False,
        turn_complete: bool = True,
        dry_run: bool = False,
        include_transcript: Optional[bool] = None,
    ) -> Dict[str, Any]:
        """A turn boundary: the trigger, commit policy and chain decide. With ``since`` (the
        previous answer's ``acknowledged``), ``messages`` holds only what was appended since;
        `Diverged` means: send the whole history once. The answer's ``transcript`` is the
        working context (with ``since``, only when maintenance changed it, unless
        ``include_transcript``)."""
        request = _dropped_none(
            dict(
                conversation=conversation,
                transcript=_text(messages),
                turn=turn,
                window=window,
                reserve=reserve,
                since=since,
                format=format,
                usage=usage,
                tool_call_outstanding=tool_call_outstanding,
                turn_complete=turn_complete,
                dry_run=dry_run,
                include_transcript=include_transcript,
            )
        )
        return _shaped(self.call("boundary", request), messages)

    def history(self, conversation: str, action: str = "summary", **arguments: Any) -> Dict[str, Any]:
        """What the agent's ``session_history`` tool reads: ``summary``, ``search`` (``query``),
        ``page`` (``archive_id``) or ``artifact`` (``uri``)."""
        return self.call("history", dict(conversation=conversation, action=action, **arguments))

    def show(self, conversation: str, archive_id: Optional[str] = None) -> Dict[str, Any]:
        """The conversation's timeline, or one compaction part by part."""
        return self.call("show", _dropped_none(dict(conversation=conversation, archive_id=archive_id)))

    def undo(self, conversation: str, archive_id: Optional[str] = None, messages: Optional[Messages] = None) -> Dict[str, Any]:
        """Takes back a compaction (default the latest) and every later one: the restored
        context as ``transcript``, in the shape of ``messages`` when given."""
        request = _dropped_none(dict(conversation=conversation, archive_id=archive_id, transcript=None if messages is None else _text(messages)))
        return _shaped(self.call("undo", request), messages)

    def pin(self, conversation: str, ids: Sequence[str]) -> List[str]:
        """Pins entries by id (within the policy's pin budget); the ids pinned now."""
        pinned: List[str] = self.call("pin", dict(conversation=conversation, ids=list(ids)))["pinned"]
        return pinned

    def unpin(self, conversation: str, ids: Sequence[str]) -> List[str]:
        """Unpins entries; the ids pinned now."""
        pinned: List[str] = self.call("unpin", dict(conversation=conversation, ids=list(ids)))["pinned"]
        return pinned

    def notices(self, conversation: str) -> List[Dict[str, Any]]:
        """Notices not yet acknowledged, oldest first."""
        notices: List[Dict[str, Any]] = self.call("notices_take", dict(conversation=conversation))["notices"]
        return notices

    def acknowledge(self, conversation: str, ids: Sequence[str]) -> int:
        """Acknowledges notices: they are not delivered again."""
        acknowledged: int = self.call("notices_ack", dict(conversation=conversation, ids=list(ids)))["acknowledged"]
        return acknowledged

    def request(self, conversation: str, kind: str, preserve: str = "", resume: str = "") -> Dict[str, Any]:
        """Records an agent's request (``compact`` or ``handover``) for the next allowed boundary."""
        return self.call("request", dict(conversation=conversation, kind=kind, preserve=preserve, resume=resume))

    def artifact(self, uri: str) -> str:
        """The stored original behind an ``artifact://`` URI."""
        content: str = self.call("artifact_get", dict(uri=uri))["content"]
        return content


class AsyncHost:
    """`Host`'s operations as coroutines: each runs in a worker thread without the GIL."""

    def __init__(self, home: Optional[PathLike] = None, policy: Optional[PathLike] = None, plugin_dirs: Iterable[PathLike] = ()) -> None:
        self.sync = Host(home, policy, plugin_dirs)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.sync, name)
        if not callable(method):
            return method

        async def run(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        run.__name__ = name
        run.__doc__ = method.__doc__
        return run
