"""`cairn.integrations.langchain` in a real LangChain agent (`create_agent`, LangChain from
PyPI, pinned in requirements.txt) driven by LangChain's own fake chat model: the agent works
long enough for Cairn to compact twice, and the model's next request carries the compacted
context — the operator's rule kept, old outputs replaced by `artifact://` placeholders, every
tool call answered — while `session_history` finds an id from a set-aside output."""

import json
import os
import shutil
import tempfile
import unittest

import cairn

try:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool

    HAVE_LANGCHAIN = True
except ImportError:
    HAVE_LANGCHAIN = False

RULE = "Never edit the generated files under gen/."
PLANTED = "BUILD-ID-ZEBRA-7431"
# The integrations compact under this policy (the default aiming lower), so that Cairn's
# checkpoint summary is in a request, not only elided outputs.
DEEP_POLICY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "policies", "offline-deep.toml")



@unittest.skipUnless(HAVE_LANGCHAIN or os.environ.get("CI"), "langchain is not installed: pip install -r host/python/tests/requirements.txt")
class LangChainMiddlewareTest(unittest.TestCase):
    def setUp(self):
        if not HAVE_LANGCHAIN:
            self.fail("CI installs langchain (.ci/run: pip install -r host/python/tests/requirements.txt)")
        self.dir = tempfile.mkdtemp(prefix="cairn-lc-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_a_long_agent_run_is_compacted_by_cairn_twice(self):
        from cairn.integrations.langchain import CairnMiddleware

        seen = []

        class Scripted(GenericFakeChatModel):
            """LangChain's fake model, recording each request; it takes tools as given."""

            def bind_tools(self, tools, **kwargs):
                return self

            def _generate(self, messages, stop=None, run_manager=None, **kwargs):
                seen.append(list(messages))
                return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

        @tool
        def run(cmd: str) -> str:
            """Run a shell command in the project."""
            log = "\n".join(f"{cmd}: line {n}: compiling module_{n} ok" for n in range(120))
            return log + (f"\nbuild id {PLANTED}" if cmd == "make step0" else "")

        rounds = 40
        script = [AIMessage(content=f"Round {i}.", tool_calls=[{"name": "run", "args": {"cmd": f"make step{i}"}, "id": f"call_{i}"}]) for i in range(rounds)]
        script.append(AIMessage(content="The build passes."))
        host = cairn.Host(home=os.path.join(self.dir, "home"), policy=DEEP_POLICY)
        middleware = CairnMiddleware(host, "lc", window=24_000, reserve=2_000)
        agent = create_agent(Scripted(messages=iter(script)), [run], middleware=[middleware])
        final = agent.invoke({"messages": [HumanMessage(f"Fix the build. {RULE}")]}, {"recursion_limit": 4 * rounds + 20})

        moments = host.show("lc")["timeline"]["moments"]
        compactions = [m for m in moments if m.get("kind") == "compaction" and m.get("status") == "committed"]
        self.assertGreaterEqual(len(compactions), 2, json.dumps(moments, indent=1))
        self.assertEqual(len(seen), rounds + 1, "every scripted model call happened")

        last = seen[-1]
        text = "\n".join(str(m.content) for m in last)
        self.assertIn("Checkpoint (Cairn: earlier history, compacted)", text, "Cairn's summary is in the request after compaction")
        self.assertIn(RULE, text, "the operator's rule is in the request after compaction")
        self.assertIn("artifact://", text, "old outputs are placeholders naming where the whole is")
        self.assertNotIn(PLANTED, text, "the early output was set aside")
        self.assertLess(len(last), 3 * rounds, "the request is the compacted context")
        for request in seen:
            calls = {c["id"] for m in request if isinstance(m, AIMessage) for c in m.tool_calls}
            answered = {m.tool_call_id for m in request if isinstance(m, ToolMessage)}
            self.assertEqual(calls, answered, "every tool call keeps its result in every request")
        self.assertEqual(final["messages"][-1].content, "The build passes.")

        history = middleware.tools[0]
        self.assertEqual(history.name, "session_history")
        self.assertIn(PLANTED, history.invoke({"action": "search", "query": PLANTED}))


        # Undo of the first compaction takes back every one after it: what was set aside is back.
        restored = host.undo("lc", archive_id=compactions[0]["archive_id"])
        self.assertEqual(len(restored["undone"]), len(compactions))
        self.assertIn(PLANTED, restored["transcript"], "undo restores the context before the first compaction")

if __name__ == "__main__":
    unittest.main()
