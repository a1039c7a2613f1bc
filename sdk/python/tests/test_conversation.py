"""The lent conversation (contract 0.2.0) in plain CPython: the default path of
`Strategy.compact_lent`, the list-backed `History`, and outcomes mixing `Original`s.
(`test_export.py` runs the same paths against the generated bindings.)"""

import dataclasses
import unittest

from cairn_sdk import (
    Entry, EntryOutline, EntryRange, Failed, History, Image, ImageOutline, LentRequest, Origin, Original,
    Outcome, Placeholder, RequestKind, Role, Strategy, Text, TextOutline, Thinking, ThinkingOutline,
    ToolCall, ToolResult, ToolResultOutline, Unavailable, changed_range_outcome, summary_entry,
)
from cairn_sdk.testing import FakeHost, OutcomeRefused, assistant, check_outcome, compact_request, lend, system, tool_exchange, user


def conversation() -> list[Entry]:
    return [
        system("be brief"),
        user("fix the build"),
        *tool_exchange("c1", "bash", '{"command": "make"}', "x" * 4000),
        assistant("the linker is missing"),
        *tool_exchange("c2", "bash", '{"command": "ls"}', "y" * 4000),
        user("go on"),
    ]


class Masker(Strategy):
    """Masks every long tool result of the replaceable range (through `compact`)."""

    def compact(self, request):
        changed = {}
        for i in range(request.protected_head, request.tail_start):
            entry = request.entries[i]
            parts = [ToolResult(p.call_id, "[masked]", p.is_error, "artifact://x/1") if isinstance(p, ToolResult) and len(p.content) > 100 else p for p in entry.parts]
            if parts != entry.parts:
                changed[i] = dataclasses.replace(entry, parts=parts)
        return changed_range_outcome(request.entries, changed)


class DefaultPath(unittest.TestCase):
    def test_unchanged_entries_go_back_as_their_index_changed_ones_whole(self):
        entries = conversation()
        request = compact_request(entries, protected_head=1, tail_start=7)
        history, lent = lend(request)
        outcome = Masker().compact_lent(history, lent)
        self.assertEqual(outcome.replaced, EntryRange(entries[3].id, entries[6].id))
        kinds = [type(r).__name__ for r in outcome.replacement]
        self.assertEqual(kinds, ["Entry", "Original", "Original", "Entry"])
        self.assertEqual(outcome.replacement[1:3], [Original(4), Original(5)])
        self.assertEqual(outcome.replacement[0].parts[0].content, "[masked]")
        check_outcome(request, outcome)  # Originals resolve to the request's entries

    def test_new_entries_and_changed_fields_go_back_whole(self):
        entries = conversation()

        class Summarise(Strategy):
            def compact(self, request):
                kept = dataclasses.replace(request.entries[2], turn=9)  # only the turn differs
                return Outcome(EntryRange(entries[1].id, entries[6].id), [summary_entry("summary"), request.entries[1], kept])

        history, lent = lend(compact_request(entries, 1, 7))
        replacement = Summarise().compact_lent(history, lent).replacement
        self.assertEqual([type(r).__name__ for r in replacement], ["Entry", "Original", "Entry"])
        self.assertEqual((replacement[0].id, replacement[1], replacement[2].turn), ("", Original(1), 9))

    def test_an_entry_changed_in_place_is_not_taken_for_its_original(self):
        entries = conversation()

        class InPlace(Strategy):
            def compact(self, request):
                request.entries[3].parts[0] = ToolResult("c1", "[masked]")
                return Outcome(EntryRange(entries[3].id, entries[3].id), [request.entries[3]])

        history = History(entries)  # hands the plugin these very objects
        (sent,) = InPlace().compact_lent(history, lend(compact_request(entries, 1, 7))[1]).replacement
        self.assertIsInstance(sent, Entry)
        self.assertEqual(sent.parts, [ToolResult("c1", "[masked]")])

    def test_the_request_keeps_every_field_and_gets_the_entries(self):
        seen = []

        class Record(Strategy):
            def compact(self, request):
                seen.append(request)
                return Outcome(EntryRange("a", "a"), [])

        entries = conversation()
        lent = LentRequest(RequestKind.HANDOVER, "a-9", 1, 7, 123, "keep x", "go on", "{}", '{"k": 1}')
        Record().compact_lent(History(entries), lent)
        self.assertEqual(seen, [lent.with_entries(entries)])
        self.assertEqual((seen[0].entries, seen[0].archive_id, seen[0].config), (entries, "a-9", '{"k": 1}'))

    def test_a_lean_override_replaces_the_default(self):
        entries = conversation()

        class Lean(Strategy):
            def compact(self, request):
                raise AssertionError("not called when compact_lent is defined")

            def compact_lent(self, history, request):
                masked = dataclasses.replace(history.entries(3, 4)[0], parts=[ToolResult("c1", "[masked]", False, history.set_aside(3, 0))])
                return Outcome(EntryRange(entries[3].id, entries[6].id), [masked, Original(4), Original(5), Original(6)])

        request = compact_request(entries, 1, 7)
        with FakeHost() as host:
            outcome = Lean().compact_lent(*lend(request))
        check_outcome(request, outcome)
        self.assertEqual(list(host.artifacts.values()), ["x" * 4000])


class ListHistory(unittest.TestCase):
    def test_reads_by_index_clamped(self):
        entries = conversation()
        history = History(entries)
        self.assertEqual((history.len(), len(history)), (8, 8))
        self.assertEqual(history.entries(6, 99), entries[6:])
        self.assertEqual(history.entries(), entries)
        self.assertEqual(history.entries(5, 2), [])
        self.assertEqual(history.part_text(2, 0), '{"command": "make"}')  # a tool call's arguments
        self.assertEqual(history.part_text(3, 0), "x" * 4000)
        self.assertIsNone(history.part_text(3, 1))
        self.assertIsNone(history.part_text(99, 0))
        with FakeHost():
            self.assertEqual((history.part_tokens(3, 0), history.part_tokens(3, 5)), (1000, None))

    def test_outlines_hold_sizes_not_text(self):
        entry = Entry("e1", Role.ASSISTANT, Origin.AGENT, [Text("héllo"), Thinking("hm"), ToolCall("c", "bash", "{}"), ToolResult("c", "out", True), Image("img"), Placeholder("[p]", "u")], 7, 2, True)
        (outline,) = History([entry]).outlines(0, 1)
        parts = [TextOutline(6), ThinkingOutline(2), ToolCall("c", "bash", "{}"), ToolResultOutline("c", 3, True, None), ImageOutline(3), Placeholder("[p]", "u")]
        self.assertEqual(outline, EntryOutline("e1", Role.ASSISTANT, Origin.AGENT, parts, 7, 2, True))

    def test_set_aside_stores_the_part_or_says_why_not(self):
        history = History(conversation())
        with FakeHost() as host:
            uri = history.set_aside(3, 0)
            self.assertEqual(host.artifacts[uri], "x" * 4000)
            with self.assertRaises(Failed):
                history.set_aside(3, 4)
        with FakeHost(archive_write=False), self.assertRaisesRegex(Unavailable, "archive:write"):
            history.set_aside(3, 0)

    def test_check_outcome_refuses_an_unknown_original(self):
        entries = conversation()
        request = compact_request(entries, 1, 7)
        with self.assertRaisesRegex(OutcomeRefused, "original entry 42"):
            check_outcome(request, Outcome(EntryRange(entries[1].id, entries[1].id), [Original(42)]))


if __name__ == "__main__":
    unittest.main()
