"""`{{name}}`: compact when the context fills `compact_at` of the usable window (the window
minus the reserve kept for the reply). The agent's own request wins once any cooldown is over;
with usage unknown nothing starts automatically.
"""

from __future__ import annotations

from dataclasses import dataclass

from cairn_sdk import Compact, Trigger, TriggerDecision, TriggerInput, export_trigger, pending_request_decision, trigger_config


@dataclass
class Config:
    """The trigger's `config`; every key is optional."""

    #: Share of the usable window at which to compact.
    compact_at: float = 0.8

    def __post_init__(self) -> None:
        if not self.compact_at > 0:
            raise ValueError(f"compact_at must be above 0, not {self.compact_at}")


class Plugin(Trigger):
    def decide(self, input: TriggerInput) -> TriggerDecision | None:  # noqa: A002 - the contract's name
        # A broken config must not stop maintenance: trigger_config warns and uses the defaults.
        return decide(input, trigger_config(Config, input.config))


def decide(input: TriggerInput, config: Config) -> TriggerDecision | None:  # noqa: A002
    """The whole rule, free of host calls."""
    requested = pending_request_decision(input)
    if requested is not None:
        return requested
    usable = max(input.usage.window - input.usage.reserve, 0)
    used = input.usage.context_tokens
    if used is None or usable == 0:
        return None
    share = used / usable
    if input.cooldown_left == 0 and share >= config.compact_at:
        return Compact(f"context at {share:.0%} of the usable window")
    return None


# componentize-py instantiates `app.WitWorld`: the SDK's wrapper around Plugin.
WitWorld = export_trigger(Plugin)
