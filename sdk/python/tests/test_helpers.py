"""The helpers, with the fake host of `cairn_sdk.testing`."""

import json
import unittest
from dataclasses import dataclass, field
from typing import Literal

from cairn_sdk import (
    AgentRequest, Compact, Entry, Failed, Handover, LogLevel, ModelDenied, ModelTimeout,
    ModelUnavailable, NothingToDo, Origin, Outcome, RequestKind, Role, Text, ToolCall,
    TriggerInput, Unavailable, Usage, ask_model, ask_model_or_fallback, changed_range_outcome,
    clip_ellipsis, count_tokens, is_operator_message, log_info, message_text, parse_config,
    pending_request_decision, range_of, recount, replaceable_range, store_artifact, summary_entry,
    summary_replacement, tail_chars, tool_calls, trigger_config,
)
from cairn_sdk.host import NoHostError, current_host
from cairn_sdk.testing import FakeHost, OutcomeRefused, assistant, check_outcome, compact_request, system, tool_exchange, user


@dataclass
class Limits:
    soft: float = 0.5
    hard: float = 0.9


@dataclass
class Config:
    min_tokens: int = 200
    protected_tools: list[str] = field(default_factory=list)
    mode: Literal["fast", "thorough"] = "fast"
    label: str | None = None
    limits: Limits = field(default_factory=Limits)
    verbose: bool = False

    def __post_init__(self):
        if self.min_tokens < 0:
            raise ValueError(f"min_tokens must be 0 or more, not {self.min_tokens}")


def trigger_input(cooldown_left=0, kind=None):
    request = AgentRequest(kind, "the failing test", "fix it") if kind else None
    return TriggerInput(Usage(None, 0, 0), turn=1, cooldown_left=cooldown_left, pending_request=request)


class Config_(unittest.TestCase):
    def test_empty_text_means_defaults(self):
        self.assertEqual(parse_config(Config, ""), Config())
        self.assertEqual(parse_config(Config, "  \n"), Config())
        self.assertEqual(parse_config(Config, "{}"), Config())

    def test_values_are_read_and_typed(self):
        loaded = parse_config(Config, json.dumps({
            "min_tokens": 10, "protected_tools": ["todo"], "mode": "thorough", "label": "x",
            "limits": {"hard": 1}, "verbose": True,
        }))
        self.assertEqual(loaded, Config(10, ["todo"], "thorough", "x", Limits(0.5, 1.0), True))
        self.assertIsInstance(loaded.limits.hard, float, "an int is accepted for a float, as a float")
        self.assertIsNone(parse_config(Config, '{"label": null}').label)

    def test_what_is_wrong_is_named(self):
        for text, why in [
            ('{"clamp": 10}', "config: unknown field `clamp`, expected one of `min_tokens`, "),
            ('{"limits": {"hardest": 1}}', "config: unknown field `limits.hardest`"),
            ('{"min_tokens": "10"}', 'config: invalid type for `min_tokens`: expected int, found "10"'),
            ('{"min_tokens": true}', "config: invalid type for `min_tokens`: expected int, found true"),
            ('{"min_tokens": 1.5}', "config: invalid type for `min_tokens`: expected int, found 1.5"),
            ('{"verbose": 1}', "config: invalid type for `verbose`: expected bool, found 1"),
            ('{"protected_tools": [1]}', "config: invalid type for `protected_tools[0]`: expected str, found 1"),
            ('{"label": 3}', "config: invalid type for `label`: expected str, found 3"),
            ('{"mode": "slow"}', 'config: invalid value for `mode`: expected one of "fast", "thorough", found "slow"'),
            ('{"min_tokens": -1}', "config: min_tokens must be 0 or more, not -1"),
            ("[1]", "config: invalid type for the config: expected an object, found [1]"),
            ("{", "config: not JSON: "),
        ]:
            with self.subTest(text=text), self.assertRaises(Failed) as failed:
                parse_config(Config, text)
            self.assertTrue(failed.exception.message.startswith(why), failed.exception.message)

    def test_a_broken_trigger_config_warns_and_uses_the_defaults(self):
        with FakeHost() as host:
            self.assertEqual(trigger_config(Config, '{"min_tokens": "x"}'), Config())
            self.assertEqual(trigger_config(Config, '{"min_tokens": 3}').min_tokens, 3)
        self.assertEqual(host.logs, [(LogLevel.WARN, 'config: invalid type for `min_tokens`: expected int, found "x"; using the defaults')])


class Triggers(unittest.TestCase):
    def test_a_pending_request_waits_for_the_cooldown(self):
        self.assertIsNone(pending_request_decision(trigger_input()))
        self.assertIsNone(pending_request_decision(trigger_input(2, RequestKind.COMPACT)))
        self.assertEqual(pending_request_decision(trigger_input(0, RequestKind.COMPACT)), Compact("compaction requested by the agent"))
        self.assertEqual(
            pending_request_decision(trigger_input(0, RequestKind.HANDOVER), "context at 63% of the window"),
            Handover("handover requested by the agent (context at 63% of the window)"),
        )


class Strategies(unittest.TestCase):
    def setUp(self):
        self.entries = [system("sys"), user("task"), *tool_exchange("c1", "bash", '{"command":"ls"}', "a\nb"), assistant("done")]

    def test_replaceable_range_is_the_window_or_nothing_to_do(self):
        self.assertEqual(replaceable_range(compact_request(self.entries, 1, 4)), range(1, 4))
        self.assertEqual(replaceable_range(compact_request(self.entries, 1, 99)), range(1, 5))
        with self.assertRaises(NothingToDo):
            replaceable_range(compact_request(self.entries, 3, 3))

    def test_entries_and_ranges(self):
        calls = tool_calls(self.entries)
        self.assertEqual(calls, {"c1": ToolCall("c1", "bash", '{"command":"ls"}')})
        self.assertEqual(range_of(self.entries, 1, 3).first, self.entries[1].id)
        self.assertTrue(is_operator_message(self.entries[1]))
        self.assertFalse(is_operator_message(self.entries[4]))
        two_texts = Entry("x", Role.ASSISTANT, Origin.AGENT, [Text("a"), ToolCall("c", "n", "{}"), Text("b")])
        self.assertEqual(message_text(two_texts), "a\nb")

    def test_clipping(self):
        self.assertEqual(tail_chars("abcdef", 2), "ef")
        self.assertEqual(tail_chars("ab", 5), "ab")
        self.assertEqual(clip_ellipsis("hello world", 6), "hello…")
        self.assertEqual(clip_ellipsis("hello", 5), "hello")

    def test_summaries_keep_pinned_entries(self):
        self.entries[2].pinned = True
        replacement = summary_replacement(self.entries[1:4], "what happened")
        self.assertEqual(replacement[0], summary_entry("what happened"))
        self.assertEqual((replacement[0].id, replacement[0].origin), ("", Origin.SUMMARY))
        self.assertEqual(replacement[1:], [self.entries[2]])

    def test_changed_range_outcome_copies_what_lies_between(self):
        self.assertIsNone(changed_range_outcome(self.entries, {}))
        with FakeHost() as host:
            a, b = (Entry(e.id, e.role, e.origin, [Text("x")]) for e in (self.entries[1], self.entries[4]))
            self.assertEqual(recount(a), 1)
            outcome = changed_range_outcome(self.entries, {4: b, 1: a})
        self.assertEqual(outcome, Outcome(range_of(self.entries, 1, 4), [a, *self.entries[2:4], b]))
        self.assertEqual(host.logs, [])

    def test_the_host_checks_are_reproduced(self):
        request = compact_request(self.entries, 1, 4)
        with self.assertRaisesRegex(OutcomeRefused, "reaches into the verbatim tail"):
            check_outcome(request, Outcome(range_of(self.entries, 1, 4), []))
        with self.assertRaisesRegex(OutcomeRefused, "starts inside the protected head"):
            check_outcome(request, Outcome(range_of(self.entries, 0, 1), []))
        with self.assertRaisesRegex(OutcomeRefused, "breaks tool-call pairing: tool result c1 has no earlier tool call"):
            check_outcome(request, Outcome(range_of(self.entries, 2, 2), []))
        with self.assertRaisesRegex(OutcomeRefused, "invents entry id 'e-nope'"):
            check_outcome(request, Outcome(range_of(self.entries, 1, 1), [Entry("e-nope", Role.USER, Origin.SUMMARY, [])]))
        with self.assertRaisesRegex(OutcomeRefused, "does not shrink"):
            check_outcome(request, Outcome(range_of(self.entries, 1, 1), [self.entries[1]]))
        self.entries[1].pinned = True
        with self.assertRaisesRegex(OutcomeRefused, "drops or changes pinned entry"):
            check_outcome(request, Outcome(range_of(self.entries, 1, 3), [summary_entry("s")]))
        before, after = check_outcome(request, Outcome(range_of(self.entries, 1, 3), summary_replacement(self.entries[1:4], "s")))
        self.assertLess(after, before)


class Capabilities(unittest.TestCase):
    def test_without_a_host_a_capability_call_says_so(self):
        with self.assertRaisesRegex(NoHostError, "FakeHost"):
            count_tokens("x")
        with FakeHost() as host:
            self.assertIs(current_host(), host)
            with FakeHost() as inner:
                self.assertIs(current_host(), inner)
            self.assertIs(current_host(), host)
        with self.assertRaises(NoHostError):
            current_host()

    def test_logs_and_tokens(self):
        with FakeHost(tokens=len) as host:
            log_info("hello")
            self.assertEqual(count_tokens("abc"), 3)
        self.assertEqual(host.messages(LogLevel.INFO), ["hello"])

    def test_the_model_or_the_fallback(self):
        with FakeHost(model="a summary") as host:
            self.assertEqual(ask_model_or_fallback("sys", "user", 100, "extract"), "a summary")
        self.assertEqual([(m.role, m.content) for m in host.completions[0][0]], [("system", "sys"), ("user", "user")])
        with FakeHost(model=ModelDenied("not granted")) as host:
            self.assertIsNone(ask_model_or_fallback("s", "u", 100, "deterministic extraction"))
        self.assertEqual(host.messages(), ["model not granted: deterministic extraction"])
        for error, why in [(ModelUnavailable("no endpoint"), "model unavailable: no endpoint"), (ModelTimeout(), "model timed out")]:
            with FakeHost(model=error), self.assertRaises(Unavailable) as failed:
                ask_model_or_fallback("s", "u", 100, "x")
            self.assertEqual(failed.exception.message, why)
        with FakeHost(model=lambda messages, max_tokens: f"{len(messages)} messages, {max_tokens}"):
            self.assertEqual(ask_model("s", "u", 7), "2 messages, 7")

    def test_artifacts(self):
        with FakeHost() as host:
            uri = store_artifact("the original")
            self.assertEqual(current_host().search("ORIGINAL", 0, 5).hits[0].entry_id, uri)
            self.assertEqual(current_host().page_entries("a-test", 0, 5, 4).entries[0].text, "original")
        self.assertEqual(host.artifacts, {"artifact://a-test/1": "the original"})
        with FakeHost(archive_write=False), self.assertRaises(Unavailable):
            store_artifact("x")


if __name__ == "__main__":
    unittest.main()
