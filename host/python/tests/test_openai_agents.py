"""`cairn.integrations.openai_agents` in a real OpenAI Agents SDK run (pinned in
requirements.txt) driven by the SDK's own `ScriptedModel`: a run long enough for Cairn to
compact twice; the model's next input carries the compacted history — the operator's rule
kept, old outputs as `artifact://` placeholders, every function call answered — and the
`session_history` function tool finds an id from a set-aside output."""

import asyncio
import json
import os
import shutil
import tempfile
import unittest

import cairn

try:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    HAVE_AGENTS = True
except ImportError:
    HAVE_AGENTS = False

RULE = "Never edit the generated files under gen/."
PLANTED = "BUILD-ID-ZEBRA-7431"
# The integrations compact under this policy (the default aiming lower), so that Cairn's
# checkpoint summary is in a request, not only elided outputs.
DEEP_POLICY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "policies", "offline-deep.toml")


def item(raw):
    return raw if isinstance(raw, dict) else raw.model_dump(exclude_unset=True)


@unittest.skipUnless(HAVE_AGENTS or os.environ.get("CI"), "openai-agents is not installed: pip install -r host/python/tests/requirements.txt")
class OpenAiAgentsInputFilterTest(unittest.TestCase):
    def setUp(self):
        if not HAVE_AGENTS:
            self.fail("CI installs openai-agents (.ci/run: pip install -r host/python/tests/requirements.txt)")
        self.dir = tempfile.mkdtemp(prefix="cairn-oai-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_a_long_run_is_compacted_by_cairn_twice(self):
        from cairn.integrations.openai_agents import input_filter, session_history_tool

        @function_tool
        def run(cmd: str) -> str:
            """Run a shell command in the project."""
            log = "\n".join(f"{cmd}: line {n}: compiling module_{n} ok" for n in range(120))
            return log + (f"\nbuild id {PLANTED}" if cmd == "make step0" else "")

        rounds = 40
        steps = [[assistant_message(f"Round {i}.", item_id=f"msg_{i}"), function_call("run", {"cmd": f"make step{i}"}, call_id=f"call_{i}")] for i in range(rounds)]
        steps.append([assistant_message("The build passes.", item_id="msg_end")])
        model = ScriptedModel(steps)
        host = cairn.Host(home=os.path.join(self.dir, "home"), policy=DEEP_POLICY)
        agent = Agent(name="coder", instructions="You are a coding agent.", model=model, tools=[run, session_history_tool(host, "oai")])
        config = RunConfig(call_model_input_filter=input_filter(host, "oai", window=24_000, reserve=2_000), tracing_disabled=True)
        result = asyncio.run(Runner.run(agent, f"Fix the build. {RULE}", run_config=config, max_turns=rounds + 5))
        self.assertEqual(result.final_output, "The build passes.")

        moments = host.show("oai")["timeline"]["moments"]
        committed = [m for m in moments if m.get("kind") == "compaction" and m.get("status") == "committed"]
        self.assertGreaterEqual(len(committed), 2, moments)
        calls = model.calls
        self.assertEqual(len(calls), rounds + 1)

        last = [item(i) for i in calls[-1].input]
        text = json.dumps(last)
        self.assertIn("Checkpoint (Cairn: earlier history, compacted)", text, "Cairn's summary is in the request after compaction")
        self.assertIn(RULE, text, "the operator's rule is in the input after compaction")
        self.assertIn("artifact://", text, "old outputs are placeholders naming where the whole is")
        self.assertNotIn(PLANTED, text, "the early output was set aside")
        self.assertEqual(calls[-1].system_instructions, "You are a coding agent.", "the instructions go separately, as they came")
        for call in calls:
            items = [item(i) for i in call.input] if isinstance(call.input, list) else []
            asked = {i["call_id"] for i in items if i.get("type") == "function_call"}
            answered = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
            self.assertEqual(asked, answered, "every function call keeps its output in every input")

        found = host.history("oai", "search", query=PLANTED)
        self.assertIn(PLANTED, json.dumps(found))


        # Undo of the first compaction takes back every one after it: what was set aside is back.
        restored = host.undo("oai", archive_id=committed[0]["archive_id"])
        self.assertEqual(len(restored["undone"]), len(committed))
        self.assertIn(PLANTED, restored["transcript"], "undo restores the context before the first compaction")

if __name__ == "__main__":
    unittest.main()
