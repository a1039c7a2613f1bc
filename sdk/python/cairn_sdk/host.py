"""Host capabilities behind one small indirection, so plugin code runs in plain CPython.

Every capability call goes through the *current host*, an object with the :class:`Host`
methods. Inside a component, the ``export_*`` wrapper installs the host that calls the real
WIT imports (:mod:`cairn_sdk.export`); a test installs :class:`cairn_sdk.testing.FakeHost`
(``with FakeHost() as host: ...``). Plugin code only calls the functions below (or the helpers
built on them) and never knows which host answers.

Each call works only if the policy grants the capability to the plugin's step and the manifest
declares it: ``log`` drops lines silently when not granted; ``model`` answers
:class:`ModelDenied`; archive calls raise :class:`ArchiveDenied`.
"""

from __future__ import annotations

from typing import Protocol

from .types import ArchiveSummary, Hits, LogLevel, Message, Page

__all__ = [
    "Host", "NoHostError", "current_host", "set_host",
    "log", "count", "complete", "read_summary", "search", "page_entries", "put_artifact",
]


class Host(Protocol):
    """What a plugin can ask of Cairn. Errors are the SDK's exceptions
    (:class:`ModelError`, :class:`ArchiveError` subclasses)."""

    def log(self, level: LogLevel, message: str) -> None:
        """A line in the host's `tracing` log, tagged with the plugin's name."""

    def count_tokens(self, text: str) -> int:
        """Exact token count by the host's tokenizer."""

    def complete(self, messages: list[Message], max_tokens: int) -> str:
        """One completion by the harness's model or a configured endpoint."""

    def read_summary(self) -> ArchiveSummary:
        """An overview of the conversation's archives, newest first."""

    def search(self, query: str, offset: int, limit: int) -> Hits:
        """Ranked keyword search over every archived entry of the conversation."""

    def page_entries(self, archive_id: str, offset: int, limit: int, char_offset: int) -> Page:
        """Entries [offset, offset + limit) of one archive; ``char_offset`` applies to the first."""

    def put_artifact(self, content: str) -> str:
        """Stores ``content`` with this compaction's archive; returns its ``artifact://`` URI."""


class NoHostError(RuntimeError):
    """A capability was called with no host installed (plain CPython without a fake)."""


_current: Host | None = None


def set_host(host: Host | None) -> Host | None:
    """Installs ``host`` for every capability call that follows; returns the one it replaces."""
    global _current
    previous, _current = _current, host
    return previous


def current_host() -> Host:
    """The installed host; raises :class:`NoHostError` when there is none."""
    if _current is None:
        raise NoHostError(
            "no Cairn host: capabilities answer only inside a component (export_* installs the host) "
            "or under a test host (cairn_sdk.testing.FakeHost)"
        )
    return _current


def log(level: LogLevel, message: str) -> None:
    current_host().log(level, message)


def count(text: str) -> int:
    return current_host().count_tokens(text)


def complete(messages: list[Message], max_tokens: int) -> str:
    return current_host().complete(messages, max_tokens)


def read_summary() -> ArchiveSummary:
    return current_host().read_summary()


def search(query: str, offset: int = 0, limit: int = 20) -> Hits:
    return current_host().search(query, offset, limit)


def page_entries(archive_id: str, offset: int = 0, limit: int = 30, char_offset: int = 0) -> Page:
    return current_host().page_entries(archive_id, offset, limit, char_offset)


def put_artifact(content: str) -> str:
    return current_host().put_artifact(content)
