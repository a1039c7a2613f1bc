"""The masking rules, in plain CPython: `PYTHONPATH=../../sdk/python python3 -m unittest`."""

from __future__ import annotations

import json
import unittest

from cairn_sdk import (
    Entry, Failed, NothingToDo, Outcome, RequestKind, ToolCall, ToolResult, Unavailable, entry_text,
)
from cairn_sdk.testing import FakeHost, assistant, check_outcome, compact_request, system, tool_exchange, user
from observation_mask import ObservationMask, is_masked, normalise_args

BIG = "line of build output\n" * 40  # ~210 approximate tokens


def bash(call_id: str, command: str, output: str = BIG, *, is_error: bool = False) -> list[Entry]:
    return tool_exchange(call_id, "bash", json.dumps({"command": command}), output, is_error=is_error)


def conversation(*exchanges: list[Entry], tail: int = 1) -> tuple[list[Entry], int, int]:
    """system + task, the exchanges, then `tail` closing entries; returns (entries, head, tail_start)."""
    entries = [system("You are a coding agent."), user("Fix the failing test.")]
    for exchange in exchanges:
        entries.extend(exchange)
    closing = [assistant("Done: the test passes."), user("Thanks, now the docs.")][:tail]
    entries.extend(closing)
    return entries, 1, len(entries) - len(closing)


def run(entries: list[Entry], head: int, tail_start: int, config: dict | None = None, **host: object) -> tuple[Outcome, FakeHost]:
    request = compact_request(entries, head, tail_start, config=json.dumps(config) if config else "")
    with FakeHost(**host) as fake:  # type: ignore[arg-type]
        outcome = ObservationMask().compact(request)
    check_outcome(request, outcome)  # the host's own checks: it would accept this outcome
    return outcome, fake


def results(entries: list[Entry]) -> dict[str, ToolResult]:
    return {p.call_id: p for e in entries for p in e.parts if isinstance(p, ToolResult)}


class MaskingRules(unittest.TestCase):
    def test_only_observations_older_than_the_last_keep_last_are_masked(self) -> None:
        entries, head, tail = conversation(*(bash(f"c{n}", f"make step{n}") for n in range(5)))
        outcome, host = run(entries, head, tail, {"keep_last": 2})
        after = results(outcome.replacement)
        self.assertEqual(sorted(c for c, r in after.items() if r.elided), ["c0", "c1", "c2"])
        # The range ends at the last masked entry: the two recent results are not even in it.
        self.assertNotIn("c3", after)
        self.assertEqual(len(host.artifacts), 3)
        for result in after.values():
            self.assertEqual(host.artifacts[result.elided], BIG, "the archive holds the original")
            self.assertRegex(result.content, r"^\[observation masked ~\d+ tokens — recover: artifact://a-test/\d+\]$")

    def test_the_placeholder_uses_the_shared_text_with_thousands(self) -> None:
        huge = "x" * 8000  # 2,000 approximate tokens
        entries, head, tail = conversation(bash("c0", "cat log", huge), bash("c1", "ls"))
        outcome, _ = run(entries, head, tail, {"keep_last": 1})
        result = results(outcome.replacement)["c0"]
        self.assertEqual(result.content, f"[observation masked ~2,000 tokens — recover: {result.elided}]")

    def test_masked_entries_are_recounted_and_keep_their_ids(self) -> None:
        entries, head, tail = conversation(bash("c0", "a"), bash("c1", "b"), bash("c2", "c"))
        outcome, _ = run(entries, head, tail, {"keep_last": 1})
        by_id = {e.id: e for e in entries}
        for replaced in outcome.replacement:
            original = by_id[replaced.id]
            if replaced != original:
                self.assertLess(replaced.tokens, original.tokens)
                self.assertEqual(replaced.tokens, (len(entry_text(replaced)) + 3) // 4)
                self.assertEqual((replaced.role, replaced.origin, replaced.turn), (original.role, original.origin, original.turn))

    def test_errors_stay_unless_keep_errors_is_off(self) -> None:
        entries, head, tail = conversation(bash("c0", "cargo test", is_error=True), bash("c1", "ls"), bash("c2", "pwd"))
        outcome, _ = run(entries, head, tail, {"keep_last": 1})
        self.assertNotIn("c0", results(outcome.replacement), "the error is outside the changed range")
        outcome, _ = run(entries, head, tail, {"keep_last": 1, "keep_errors": False})
        self.assertIsNotNone(results(outcome.replacement)["c0"].elided)

    def test_the_latest_result_of_a_repeated_command_stays(self) -> None:
        entries, head, tail = conversation(
            bash("c0", "git status"), bash("c1", "cat a.py"), bash("c2", "git status"), bash("c3", "make"), bash("c4", "ls")
        )
        outcome, _ = run(entries, head, tail, {"keep_last": 1})
        after = results(outcome.replacement)
        self.assertIsNotNone(after["c0"].elided, "superseded by the later git status")
        self.assertIsNotNone(after["c1"].elided, "ran once, and old")
        self.assertIsNone(after["c2"].elided, "the current view of git status")
        self.assertIsNotNone(after["c3"].elided)
        outcome, _ = run(entries, head, tail, {"keep_last": 1, "keep_latest_per_command": False})
        self.assertIsNotNone(results(outcome.replacement)["c2"].elided)

    def test_the_same_command_is_recognised_however_its_json_is_written(self) -> None:
        self.assertEqual(normalise_args('{"b": 1, "a": [1, 2]}'), normalise_args('{"a":[1,2],"b":1}'))
        self.assertEqual(normalise_args("not json"), "not json")
        first = tool_exchange("c0", "read", '{"path": "a.py", "limit": 50}', BIG)
        again = tool_exchange("c1", "read", '{"limit":50,"path":"a.py"}', BIG)
        other_tool = tool_exchange("c2", "view", '{"limit":50,"path":"a.py"}', BIG)
        entries, head, tail = conversation(first, again, other_tool, bash("c3", "ls"))
        outcome, _ = run(entries, head, tail, {"keep_last": 1})
        after = results(outcome.replacement)
        self.assertIsNotNone(after["c0"].elided)
        self.assertIsNone(after["c1"].elided, "latest read of a.py")
        self.assertIsNotNone(after["c2"].elided, "another tool is another command")

    def test_protected_tools_are_never_masked(self) -> None:
        todo = tool_exchange("c0", "todo_write", '{"items": ["x"]}', BIG)
        entries, head, tail = conversation(todo, bash("c1", "a"), bash("c2", "b"))
        outcome, _ = run(entries, head, tail, {"keep_last": 0, "protected_tools": ["todo_write"]})
        after = results(outcome.replacement)
        self.assertNotIn("c0", after)
        self.assertTrue(after["c1"].elided and after["c2"].elided)

    def test_small_outputs_are_not_worth_a_placeholder(self) -> None:
        entries, head, tail = conversation(bash("c0", "true", "ok"), bash("c1", "make"), bash("c2", "ls"))
        outcome, _ = run(entries, head, tail, {"keep_last": 0})
        self.assertNotIn("c0", results(outcome.replacement))
        # Even with min_tokens 0, a result shorter than its placeholder stays.
        outcome, _ = run(entries, head, tail, {"keep_last": 0, "min_tokens": 0})
        self.assertNotIn("c0", results(outcome.replacement))
        with self.assertRaises(NothingToDo):
            run(entries, head, tail, {"keep_last": 0, "min_tokens": 100_000})

    def test_nothing_outside_the_replaceable_window_or_pinned_changes(self) -> None:
        in_head = bash("c0", "setup")
        entries = [system("s"), *in_head, user("task"), *bash("c1", "a"), *bash("c2", "b"), *bash("c3", "c"), *bash("c4", "d")]
        entries[7].pinned = True  # c2's result
        head, tail = 3, len(entries) - 2  # c4's exchange is the verbatim tail
        outcome, _ = run(entries, head, tail, {"keep_last": 0})
        after = results(outcome.replacement)
        self.assertEqual((outcome.replaced.first, outcome.replaced.last), (entries[5].id, entries[9].id), "c1's to c3's result")
        self.assertNotIn("c0", after)
        self.assertNotIn("c4", after)
        self.assertIsNone(after["c2"].elided, "pinned")
        self.assertIsNotNone(after["c1"].elided)
        self.assertIsNotNone(after["c3"].elided)

    def test_already_masked_results_and_tool_calls_are_left_alone(self) -> None:
        entries, head, tail = conversation(bash("c0", "a"), bash("c1", "b"), bash("c2", "c"))
        first, _ = run(entries, head, tail, {"keep_last": 1})
        # Apply the first outcome, then compact again: nothing new to mask.
        by_id = {e.id: e for e in first.replacement}
        again = [by_id.get(e.id, e) for e in entries]
        with self.assertRaises(NothingToDo) as refused:
            run(again, head, tail, {"keep_last": 1})
        self.assertIn("2 already masked", refused.exception.message)
        originals = {e.id: e for e in entries}
        for replaced in first.replacement:
            calls = [p for p in replaced.parts if isinstance(p, ToolCall)]
            self.assertEqual(calls, [p for p in originals[replaced.id].parts if isinstance(p, ToolCall)])
        older = ToolResult("c", "[elided ~1,234 tokens — recover: artifact://a-1/2]")
        self.assertTrue(is_masked(older), "the placeholder text alone, as older hosts wrote it")
        self.assertFalse(is_masked(ToolResult("c", "[1, 2, 3]")))

    def test_unchanged_entries_inside_the_range_come_through_verbatim(self) -> None:
        entries, head, tail = conversation(bash("c0", "a"), bash("c1", "b", is_error=True), bash("c2", "c"), bash("c3", "d"))
        outcome, _ = run(entries, head, tail, {"keep_last": 1})
        first = next(i for i, e in enumerate(entries) if e.id == outcome.replaced.first)
        last = next(i for i, e in enumerate(entries) if e.id == outcome.replaced.last)
        self.assertEqual([e.id for e in outcome.replacement], [e.id for e in entries[first : last + 1]])
        kept = [r for r, e in zip(outcome.replacement, entries[first : last + 1], strict=True) if r == e]
        self.assertTrue(any(isinstance(p, ToolResult) and p.is_error for e in kept for p in e.parts), "the error, verbatim")

    def test_nothing_to_mask_is_nothing_to_do(self) -> None:
        entries, head, tail = conversation(bash("c0", "a"), bash("c1", "b"))
        with self.assertRaises(NothingToDo) as refused:
            run(entries, head, tail)
        self.assertEqual(refused.exception.message, "no tool observation to mask outside the last 10 (kept: 2 recent)")
        with self.assertRaises(NothingToDo):
            run(entries, 1, 1)  # empty window

    def test_handover_is_not_this_strategys_job(self) -> None:
        entries, head, tail = conversation(bash("c0", "a"), bash("c1", "b"))
        request = compact_request(entries, head, len(entries))
        request.purpose = RequestKind.HANDOVER
        with FakeHost(), self.assertRaises(NothingToDo):
            ObservationMask().compact(request)


class Configuration(unittest.TestCase):
    def test_unknown_keys_and_bad_values_fail_the_step(self) -> None:
        entries, head, tail = conversation(bash("c0", "a"), bash("c1", "b"))
        for config, why in [
            ({"keep_lats": 3}, "config: unknown field `keep_lats`"),
            ({"keep_last": "3"}, "config: invalid type for `keep_last`: expected int"),
            ({"keep_last": -1}, "config: keep_last must be 0 or more"),
            ({"protected_tools": "bash"}, "config: invalid type for `protected_tools`: expected a list"),
        ]:
            with self.subTest(config=config), self.assertRaises(Failed) as failed:
                run(entries, head, tail, config)
            self.assertTrue(failed.exception.message.startswith(why), failed.exception.message)

    def test_an_archive_the_policy_does_not_grant_makes_the_step_unavailable(self) -> None:
        entries, head, tail = conversation(bash("c0", "a"), bash("c1", "b"))
        with self.assertRaises(Unavailable) as refused:
            run(entries, head, tail, {"keep_last": 0}, archive_write=False)
        self.assertEqual(refused.exception.message, "archive write: archive:write is not granted")


if __name__ == "__main__":
    unittest.main()
