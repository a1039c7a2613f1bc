"""`cairn.integrations.pydantic_ai` in a real Pydantic AI agent (pinned in requirements.txt)
driven by Pydantic AI's own `FunctionModel`: a run long enough for Cairn to compact twice; the
model's next request carries the compacted history — the operator's rule kept, old outputs as
`artifact://` placeholders, every tool call answered — and `session_history` finds an id from a
set-aside output."""

import os
import shutil
import tempfile
import unittest

import cairn

try:
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    HAVE_PYDANTIC_AI = True
except ImportError:
    HAVE_PYDANTIC_AI = False

RULE = "Never edit the generated files under gen/."
PLANTED = "BUILD-ID-ZEBRA-7431"
# The integrations compact under this policy (the default aiming lower), so that Cairn's
# checkpoint summary is in a request, not only elided outputs.
DEEP_POLICY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "policies", "offline-deep.toml")


@unittest.skipUnless(HAVE_PYDANTIC_AI or os.environ.get("CI"), "pydantic-ai is not installed: pip install -r host/python/tests/requirements.txt")
class PydanticAiHistoryProcessorTest(unittest.TestCase):
    def setUp(self):
        if not HAVE_PYDANTIC_AI:
            self.fail("CI installs pydantic-ai (.ci/run: pip install -r host/python/tests/requirements.txt)")
        self.dir = tempfile.mkdtemp(prefix="cairn-pai-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_a_long_run_is_compacted_by_cairn_twice(self):
        from cairn.integrations.pydantic_ai import history_processor, session_history

        rounds = 40
        seen = []

        def model(messages, info):
            seen.append(list(messages))
            n = len(seen) - 1
            if n < rounds:
                return ModelResponse(parts=[TextPart(content=f"Round {n}."), ToolCallPart(tool_name="run", args={"cmd": f"make step{n}"}, tool_call_id=f"call_{n}")])
            return ModelResponse(parts=[TextPart(content="The build passes.")])

        host = cairn.Host(home=os.path.join(self.dir, "home"), policy=DEEP_POLICY)
        agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(history_processor(host, "pai", window=24_000, reserve=2_000))])

        @agent.tool_plain
        def run(cmd: str) -> str:
            """Run a shell command in the project."""
            log = "\n".join(f"{cmd}: line {n}: compiling module_{n} ok" for n in range(120))
            return log + (f"\nbuild id {PLANTED}" if cmd == "make step0" else "")

        agent.tool_plain(session_history(host, "pai"))
        result = agent.run_sync(f"Fix the build. {RULE}")
        self.assertEqual(result.output, "The build passes.")

        moments = host.show("pai")["timeline"]["moments"]
        committed = [m for m in moments if m.get("kind") == "compaction" and m.get("status") == "committed"]
        self.assertGreaterEqual(len(committed), 2, moments)
        self.assertEqual(len(seen), rounds + 1)

        last = seen[-1]
        text = "\n".join(str(getattr(p, "content", "")) for m in last for p in m.parts)
        self.assertIn("Checkpoint (Cairn: earlier history, compacted)", text, "Cairn's summary is in the request after compaction")
        self.assertIn(RULE, text, "the operator's rule is in the request after compaction")
        self.assertIn("artifact://", text, "old outputs are placeholders naming where the whole is")
        self.assertNotIn(PLANTED, text, "the early output was set aside")
        for request in seen:
            calls = {p.tool_call_id for m in request if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart)}
            answered = {p.tool_call_id for m in request if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)}
            self.assertEqual(calls, answered, "every tool call keeps its result in every request")

        self.assertIn(PLANTED, session_history(host, "pai")("search", query=PLANTED))


        # Undo of the first compaction takes back every one after it: what was set aside is back.
        restored = host.undo("pai", archive_id=committed[0]["archive_id"])
        self.assertEqual(len(restored["undone"]), len(committed))
        self.assertIn(PLANTED, restored["transcript"], "undo restores the context before the first compaction")

if __name__ == "__main__":
    unittest.main()
