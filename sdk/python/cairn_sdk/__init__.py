"""Write Cairn compaction plugins in Python (componentize-py 0.25.1).

Subclass the base class of your plugin's world — :class:`Strategy`, :class:`Trigger` or
:class:`CommitPolicy` — and export it from ``app.py``::

    from cairn_sdk import Trigger, TriggerDecision, TriggerInput, export_trigger, pending_request_decision

    class AgentOnly(Trigger):
        \"\"\"Acts only when the agent asks, once any cooldown is over.\"\"\"

        def decide(self, input: TriggerInput) -> TriggerDecision | None:
            return pending_request_decision(input)

    WitWorld = export_trigger(AgentOnly)   # componentize-py instantiates app.WitWorld

Build with ``componentize-py -d wit -w trigger componentize app -p . -o dist/agent-only.wasm``
and describe the plugin in ``cairn-plugin.toml``; see ``sdk/python/README.md``.

A strategy overrides ``compact(request)`` (every entry in ``request.entries``), or, to read
only part of the conversation the host lends it, ``compact_lent(history, request)`` (see
:mod:`cairn_sdk.conversation`).

The package is plain Python: the types are the SDK's own dataclasses (:mod:`cairn_sdk.types`),
host capabilities go through a replaceable host (:mod:`cairn_sdk.host`), and only
:mod:`cairn_sdk.export` knows the generated bindings. So plugin logic is tested with
``python3 -m unittest`` and :mod:`cairn_sdk.testing`, no Wasm needed.
"""

from .conversation import History, outline, part_text
from .export import export_commit_policy, export_strategy, export_trigger
from .helpers import (
    ask_model, ask_model_or_fallback, changed_range_outcome, clip_ellipsis, config_or_defaults,
    count_tokens, is_operator_message, log_debug, log_error, log_info, log_trace, log_warn,
    message_text, model_unavailable, parse_config, pending_request_decision, range_of, recount,
    replaceable_range, store_artifact, summary_entry, summary_replacement, tail_chars, tool_calls,
    trigger_config,
)
from .plugin import CommitPolicy, Strategy, Trigger
from .rules import SEED_MESSAGE_CHARS, SEED_MESSAGES, clip_chars, entry_text, placeholder_text, safe_cut_points, thousands
from .types import *  # noqa: F403 - the contract's types are the SDK's vocabulary
from .types import __all__ as _types_all

__version__ = "0.2.0"
#: The contract these bindings target (`wit/0.2.0`).
CONTRACT = "cairn:compaction@0.2.0"

__all__ = [
    *_types_all,
    "Strategy", "Trigger", "CommitPolicy", "History", "outline", "part_text",
    "export_strategy", "export_trigger", "export_commit_policy",
    "SEED_MESSAGES", "SEED_MESSAGE_CHARS", "entry_text", "safe_cut_points", "placeholder_text", "thousands", "clip_chars",
    "ask_model", "ask_model_or_fallback", "changed_range_outcome", "clip_ellipsis", "config_or_defaults",
    "count_tokens", "is_operator_message", "log_debug", "log_error", "log_info", "log_trace", "log_warn",
    "message_text", "model_unavailable", "parse_config", "pending_request_decision", "range_of", "recount",
    "replaceable_range", "store_artifact", "summary_entry", "summary_replacement", "tail_chars", "tool_calls",
    "trigger_config",
]
