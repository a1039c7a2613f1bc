"""`python3 -m unittest`: the plugin in plain CPython, with the SDK's fake host."""

import unittest

from app import Config, Plugin, decide
from cairn_sdk import AgentRequest, Compact, Handover, RequestKind, TriggerInput, Usage
from cairn_sdk.testing import FakeHost


def usage(tokens, **kw):
    return TriggerInput(Usage(tokens, 100_000, 20_000), turn=10, **kw)


class TriggerTest(unittest.TestCase):
    def test_compacts_from_the_threshold_only(self):
        self.assertIsNone(decide(usage(50_000), Config()))
        self.assertEqual(decide(usage(70_000), Config()), Compact("context at 88% of the usable window"))
        self.assertIsNone(decide(usage(70_000, cooldown_left=2), Config()))

    def test_unknown_usage_starts_nothing(self):
        self.assertIsNone(decide(usage(None), Config()))

    def test_the_agents_request_comes_first(self):
        request = AgentRequest(RequestKind.HANDOVER, "the plan", "run the tests")
        self.assertEqual(decide(usage(10, pending_request=request), Config()), Handover("handover requested by the agent"))

    def test_config_is_read_and_a_broken_one_falls_back_with_a_warning(self):
        with FakeHost() as host:
            self.assertIsNone(Plugin().decide(usage(60_000, config='{"compact_at": 0.9}')))
            self.assertIsInstance(Plugin().decide(usage(70_000, config='{"compact_at": "high"}')), Compact)
        self.assertEqual(len(host.messages()), 1)
        self.assertIn("using the defaults", host.messages()[0])


if __name__ == "__main__":
    unittest.main()
