"""`python3 -m unittest`: the plugin in plain CPython, with the SDK's fake host."""

import json
import unittest

from app import Config, Plugin, clip
from cairn_sdk import Failed, NothingToDo, ToolResult
from cairn_sdk.testing import FakeHost, assistant, check_outcome, compact_request, system, tool_exchange, user

LONG = "a" * 700 + "b" * 5_000 + "c" * 700


class ClipTest(unittest.TestCase):
    def test_short_outputs_stay_whole(self):
        self.assertIsNone(clip("ok", Config()))

    def test_long_outputs_keep_their_head_and_tail(self):
        self.assertEqual(clip(LONG, Config()), ("a" * 600, "c" * 600))

    def test_old_long_outputs_are_clipped_and_recoverable(self):
        entries = [
            system("You are a coding agent."),
            user("Why does the build fail?"),
            *tool_exchange("c1", "bash", '{"command": "make"}', LONG),
            *tool_exchange("c2", "bash", '{"command": "ls"}', "Makefile\nsrc"),
            assistant("The linker is missing."),  # the verbatim tail
        ]
        request = compact_request(entries, protected_head=1, tail_start=len(entries) - 1)
        with FakeHost() as host:
            outcome = Plugin().compact(request)
        check_outcome(request, outcome)  # what the host checks: range, ids, pairing, shrinking
        (clipped,) = [p for e in outcome.replacement for p in e.parts if isinstance(p, ToolResult)]
        self.assertTrue(clipped.content.startswith("a" * 600 + "\n[clipped ~"), clipped.content[:620])
        self.assertEqual(host.artifacts[clipped.elided], LONG)
        self.assertIn("clipped tool outputs in 1 entries", host.messages())

    def test_nothing_long_is_nothing_to_do_and_bad_config_fails(self):
        entries = [user("hi"), *tool_exchange("c1", "bash", "{}", "short")]
        with FakeHost(), self.assertRaises(NothingToDo):
            Plugin().compact(compact_request(entries))
        with FakeHost(), self.assertRaises(Failed):
            Plugin().compact(compact_request(entries, config=json.dumps({"max_char": 10})))


if __name__ == "__main__":
    unittest.main()
