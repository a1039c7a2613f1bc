"""The shared rules against the host's own cases (`host/rules/src/lib.rs`, `sdk/rust/src/helpers.rs`)."""

import unittest

from cairn_sdk import (
    Entry, Image, Origin, Placeholder, Role, Text, Thinking, ToolCall, ToolResult,
    clip_chars, entry_text, placeholder_text, safe_cut_points, thousands,
)


def entry(*parts):
    return Entry(id="", role=Role.ASSISTANT, origin=Origin.AGENT, parts=list(parts))


def call(call_id):
    return entry(ToolCall(call_id, "bash", "{}"))


def result(call_id, content="ok", elided=None):
    return entry(ToolResult(call_id, content, False, elided))


def text():
    return entry(Text("hi"))


class Rules(unittest.TestCase):
    def test_entry_text_reads_every_part(self):
        mixed = entry(Text("a"), ToolCall("1", "bash", '{"c":1}'), ToolResult("1", "out"))
        self.assertEqual(entry_text(mixed), 'a\nbash {"c":1}\nout\n')
        with_placeholder = entry(Text("a"), Placeholder("[thinking elided]", "artifact://a-1/1"), Thinking("t"), Image("img://1"))
        self.assertEqual(entry_text(with_placeholder), "a\n[thinking elided]\nt\nimg://1\n")
        self.assertEqual(entry_text(result("c1", "[elided]", "artifact://a-1/2")), "[elided]\n")
        self.assertEqual(entry_text(entry()), "")

    def test_no_cut_falls_between_a_call_and_its_result(self):
        self.assertEqual(safe_cut_points([text(), call("a"), text(), result("a"), text()]), [True, True, False, False, True, True])
        self.assertEqual(safe_cut_points([call("c1"), entry(Text("a")), result("c1"), call("c2")]), [True, False, False, True, True])

    def test_an_unanswered_call_does_not_block_cuts(self):
        self.assertEqual(safe_cut_points([call("a"), text()]), [True, True, True])
        self.assertEqual(safe_cut_points([]), [True])

    def test_the_first_answer_counts(self):
        # A call answered twice: the rule follows the first answer, as the host's does.
        self.assertEqual(safe_cut_points([call("a"), result("a"), text(), result("a")]), [True, False, True, True, True])

    def test_placeholders_group_thousands(self):
        self.assertEqual(placeholder_text("elided", 1_234_567, "artifact://a-1/2"), "[elided ~1,234,567 tokens — recover: artifact://a-1/2]")
        self.assertEqual([thousands(n) for n in (0, 999, 1_000, 80_640)], ["0", "999", "1,000", "80,640"])

    def test_clipping_counts_chars_not_bytes(self):
        self.assertEqual(clip_chars("ünïcode", 3), "ünï")
        self.assertEqual(clip_chars("ab", 5), "ab")


if __name__ == "__main__":
    unittest.main()
