"""`python3 -m unittest`: the plugin in plain CPython, with the SDK's fake host."""

import unittest

from app import Config, Plugin, decide
from cairn_sdk import Boundary, Commit, Defer, Proposal, Reject
from cairn_sdk.testing import FakeHost


def boundary(turn_complete=True, tool_call_outstanding=False, config=""):
    return Boundary(3, turn_complete, tool_call_outstanding, config)


def proposal(tokens_after):
    return Proposal("shake-elide", 100_000, tokens_after)


class CommitPolicyTest(unittest.TestCase):
    def test_commits_a_large_swap_between_turns(self):
        self.assertEqual(decide(boundary(), proposal(40_000), Config()), Commit())

    def test_defers_while_a_tool_runs_or_the_turn_is_open(self):
        self.assertEqual(decide(boundary(tool_call_outstanding=True), proposal(40_000), Config()), Defer("a tool call is still running"))
        self.assertEqual(decide(boundary(turn_complete=False), proposal(40_000), Config()), Defer("the turn is not complete"))

    def test_rejects_small_swaps(self):
        self.assertEqual(decide(boundary(), proposal(95_000), Config()), Reject("frees 5% of the context, less than 20%"))

    def test_the_threshold_comes_from_the_config(self):
        with FakeHost() as host:
            self.assertEqual(Plugin().decide(boundary(config='{"min_freed": 0.01}'), proposal(95_000)), Commit())
        self.assertEqual(host.logs, [])


if __name__ == "__main__":
    unittest.main()
