"""`{{name}}`: swap the working context only between turns with no tool call running, and only
when the proposal frees at least `min_freed` of the context (a swap costs the prompt cache, so
a small one is not worth it).
"""

from __future__ import annotations

from dataclasses import dataclass

from cairn_sdk import Boundary, Commit, CommitDecision, CommitPolicy, Defer, Proposal, Reject, export_commit_policy, trigger_config


@dataclass
class Config:
    """The commit policy's `config`; every key is optional."""

    #: Smallest share of the context a swap must free.
    min_freed: float = 0.2


class Plugin(CommitPolicy):
    def decide(self, boundary: Boundary, proposal: Proposal) -> CommitDecision:
        # A broken config must not stop maintenance: trigger_config warns and uses the defaults.
        return decide(boundary, proposal, trigger_config(Config, boundary.config))


def decide(boundary: Boundary, proposal: Proposal, config: Config) -> CommitDecision:
    """The whole rule, free of host calls."""
    if boundary.tool_call_outstanding:
        return Defer("a tool call is still running")
    if not boundary.turn_complete:
        return Defer("the turn is not complete")
    freed = max(proposal.tokens_before - proposal.tokens_after, 0) / max(proposal.tokens_before, 1)
    if freed < config.min_freed:
        return Reject(f"frees {freed:.0%} of the context, less than {config.min_freed:.0%}")
    return Commit()


# componentize-py instantiates `app.WitWorld`: the SDK's wrapper around Plugin.
WitWorld = export_commit_policy(Plugin)
