"""The installed `cairn` package as a Python harness uses it: OpenAI chat messages in and out,
recall of what was set aside, errors by class, one host shared by threads and coroutines, and
the `cairn` command from the same wheel. Run on the installed wheel (no path tricks): see
host/cli/tests/it/python_package.rs."""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

import cairn

RULE = "Never edit the generated files under gen/."
PLANTED = "BUILD-ID-ZEBRA-7431"


def session(turns: int = 30):
    """A coding session in OpenAI chat messages: the operator's rule first, tool calls with
    long outputs, a planted id early in one output, the latest request last."""
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": f"Fix the flaky parser test. {RULE}"}]
    for i in range(turns):
        log = "\n".join(f"step {i} line {n}: compiling module_{n} ok" for n in range(80))
        if i == 1:
            log += f"\nbuild id {PLANTED}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cargo test round_{i}"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": log})
        messages.append({"role": "assistant", "content": f"Round {i} done."})
    messages.append({"role": "user", "content": "Now make parse_header accept tabs."})
    return messages


def paired(messages):
    """Every tool call answered, and every tool result answering a call."""
    calls = {c["id"] for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []}
    results = {m["tool_call_id"] for m in messages if m.get("role") == "tool"}
    return calls == results


class HostTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cairn-py-")
        self.host = cairn.Host(home=os.path.join(self.dir, "home"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_compact_answers_in_the_callers_shape_and_history_recalls_what_was_set_aside(self):
        sent = session()
        answer = self.host.compact("app", sent)
        self.assertTrue(answer["committed"], answer.get("not_committed"))
        self.assertLess(answer["tokens_after"], answer["tokens_before"])
        self.assertEqual(answer["format"], "openai")
        kept = answer["transcript"]
        self.assertIsInstance(kept, list, "a list of messages back for a list sent")
        text = json.dumps(kept)
        self.assertIn(RULE, text, "the operator's rule survives")
        self.assertIn("Now make parse_header accept tabs.", text, "the latest request stays")
        self.assertTrue(paired(kept), "every tool call keeps its result")
        self.assertNotIn(PLANTED, text, "the early output was set aside")
        found = self.host.history("app", "search", query=PLANTED)
        self.assertIn(PLANTED, json.dumps(found), "session_history finds what was set aside")
        timeline = self.host.show("app")["timeline"]
        self.assertEqual(timeline["moments"][0]["archive_id"], answer["archive_id"])
        restored = self.host.undo("app", messages=kept)
        self.assertEqual(restored["undone"], [answer["archive_id"]])
        self.assertEqual(len(restored["transcript"]), len(sent))

    def test_text_in_text_out(self):
        answer = self.host.compact("text", json.dumps(session()))
        self.assertIsInstance(answer["transcript"], str)
        self.assertTrue(paired(json.loads(answer["transcript"])))

    def test_errors_are_classes_by_code(self):
        with self.assertRaises(cairn.NotFound) as raised:
            self.host.undo("nobody")
        self.assertEqual(raised.exception.code, "not-found")
        with self.assertRaises(cairn.InvalidRequest):
            self.host.call("compact", {"conversation": "app"})
        with self.assertRaises(cairn.InvalidRequest):
            self.host.call("compress", {})
        with self.assertRaises(cairn.TranscriptInvalid):
            self.host.compact("app", "this is no transcript")
        first = self.host.boundary("inc", session(4), turn=1, window=1_000_000)
        self.assertIsNotNone(first["acknowledged"])
        with self.assertRaises(cairn.Diverged):
            self.host.boundary("inc", [{"role": "user", "content": "next"}], turn=2, window=1_000_000, since="m-not-an-entry-of-this")
        self.assertTrue(issubclass(cairn.Diverged, cairn.CairnError))

    def test_a_broken_policy_is_policy_invalid_naming_its_file(self):
        policy = os.path.join(self.dir, "broken.toml")
        with open(policy, "w") as f:
            f.write("[lifecycle]\ncooldown_turns = \"soon\"\n")
        with self.assertRaises(cairn.PolicyInvalid) as raised:
            cairn.Host(home=os.path.join(self.dir, "home"), policy=policy)
        self.assertIn("broken.toml", str(raised.exception))

    def test_one_host_serves_threads_and_coroutines(self):
        errors = []

        def work(n):
            try:
                self.assertTrue(self.host.compact(f"thread-{n}", session(12))["committed"])
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(self.host.show("thread-3")["timeline"]["moments"]), 1)

        async def both():
            host = cairn.AsyncHost(home=os.path.join(self.dir, "home"))
            return await asyncio.gather(host.compact("async-a", session(12)), host.compact("async-b", session(12)))

        for answer in asyncio.run(both()):
            self.assertTrue(answer["committed"])


class CommandTest(unittest.TestCase):
    def test_the_cairn_command_runs_from_the_wheel(self):
        exe = shutil.which("cairn", path=os.path.dirname(sys.executable))
        self.assertIsNotNone(exe, "the wheel installs the `cairn` script beside this Python")
        version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True)
        self.assertEqual(version.stdout.split(), ["cairn", cairn.__version__])
        with tempfile.TemporaryDirectory() as dir:
            demo = subprocess.run([exe, "demo", "--turns", "8", "--dir", os.path.join(dir, "demo")], capture_output=True, text=True)
            self.assertEqual(demo.returncode, 0, demo.stderr)
            self.assertIn("returns the original, byte for byte", demo.stdout)
        usage = subprocess.run([exe, "compact"], capture_output=True, text=True)
        self.assertEqual(usage.returncode, 2, "a usage error exits 2, as the binary")

    def test_agent_hooks_installed_from_the_wheel_run_the_wheels_command(self):
        exe = shutil.which("cairn", path=os.path.dirname(sys.executable))
        with tempfile.TemporaryDirectory() as dir:
            settings = os.path.join(dir, "settings.json")
            env = dict(os.environ, HOME=dir, CAIRN_HOME=os.path.join(dir, "home"))
            env.pop("CAIRN_EXE", None)
            out = subprocess.run([exe, "claude-code", "install", "--settings", settings], capture_output=True, text=True, env=env)
            self.assertEqual(out.returncode, 0, out.stderr)
            with open(settings) as f:
                hooks = json.load(f)["hooks"]
            command = hooks["PreCompact"][0]["hooks"][0]["command"]
            self.assertTrue(command.startswith(f"{exe} claude-code pre-compact"), f"the hook runs this wheel's `cairn`, not the interpreter: {command}")
            # The hook runs: a session-start with nothing archived adds nothing and succeeds.
            payload = json.dumps({"session_id": "s", "transcript_path": os.path.join(dir, "none.jsonl"), "cwd": dir, "hook_event_name": "SessionStart", "source": "startup"})
            ran = subprocess.run(command.replace("pre-compact", "session-start"), shell=True, input=payload, capture_output=True, text=True, env=env)
            self.assertEqual(ran.returncode, 0, ran.stderr)


if __name__ == "__main__":
    unittest.main()
