"""One base class per world. Subclass the one your manifest's ``kind`` names, override its
method, and export the class from ``app.py`` (see :mod:`cairn_sdk.export`).

Every method has a default, as in the Rust SDK, so a plugin keeps working when the contract
grows. The exporter makes a fresh instance for every call: keep no state between calls (the
host may run each call in a fresh sandbox anyway).
"""

from __future__ import annotations

from .conversation import History, compact_with_every_entry
from .types import Boundary, Commit, CommitDecision, CompactRequest, Failed, LentRequest, Outcome, Proposal, TriggerDecision, TriggerInput

__all__ = ["Strategy", "Trigger", "CommitPolicy"]


class Strategy:
    """What replaces older history. Called with the entries, the protected head and the
    verbatim tail (world ``strategy``): override :meth:`compact`, or :meth:`compact_lent` to
    read only part of the conversation."""

    def compact(self, request: CompactRequest) -> Outcome:
        """Returns the outcome, or raises :class:`StrategyError` (``Unavailable``,
        ``NothingToDo``, ``Failed``). Any other exception is reported as ``Failed``."""
        raise Failed("compact is not implemented by this plugin")

    def compact_lent(self, history: History, request: LentRequest) -> Outcome:
        """The call as the host makes it (contract 0.2.0): the conversation lent, read by
        index. By default every entry is read in one batch, :meth:`compact` answers, and each
        replacement entry equal to the original of its id goes back as an :class:`Original`.
        Override it to read less (``history.outlines``, ``part_text`` of a few parts) and
        answer with :class:`Original` for the entries kept unchanged."""
        return compact_with_every_entry(history, request, self.compact)


class Trigger:
    """When to act: called at every turn boundary (world ``trigger``)."""

    def decide(self, input: TriggerInput) -> TriggerDecision | None:  # noqa: A002 - the WIT's name
        """``Advise``, ``Compact``, ``Handover``, or None for no action."""
        return None


class CommitPolicy:
    """Whether swapping the working context now is safe (world ``commit-policy``)."""

    def decide(self, boundary: Boundary, proposal: Proposal) -> CommitDecision:
        """``Commit()``, ``Defer(reason)`` or ``Reject(reason)``."""
        return Commit()
