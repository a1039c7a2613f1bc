"""`cairn serve` as an MCP client sees it, through the official Python SDK.

Run in this folder with the binary and the recorded sessions:

    CAIRN_BIN=/path/to/cairn CAIRN_SHARED=/path/to/shared/transcripts python3 -m unittest -v

Both variables are required: without them every test fails (these tests are run by the Rust
test suite, which always sets them).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

HARNESS_TOOLS = {
    "compact",
    "handover",
    "boundary",
    "request",
    "notices_take",
    "notices_ack",
    "artifact_get",
    "plugins_list",
    "policy_reload",
    "policy_set",
    "undo",
    "pin",
    "unpin",
    "show",
}
AGENT_TOOLS = {"session_history", "context_maintenance"}

OLD_CHAIN = """\
[[chain]]
plugin = "shake-elide"
grants = ["log", "tokens", "archive:write"]
config = { min_tokens = 200 }
"""
# Nothing is large enough for shake-elide any more, so the host's last resort commits.
NEW_CHAIN = OLD_CHAIN.replace("min_tokens = 200", "min_tokens = 100000")
SYNTAX_ERROR = '[[chain]\nplugin = "shake-elide"\n'
UNKNOWN_PLUGIN = '[[chain]]\nplugin = "no-such-plugin"\ngrants = ["log"]\n'

CAIRN = os.environ.get("CAIRN_BIN", "")
SHARED = Path(os.environ.get("CAIRN_SHARED", ""))


def setUpModule() -> None:
    missing = [name for name in ("CAIRN_BIN", "CAIRN_SHARED") if not os.environ.get(name)]
    if missing:
        raise RuntimeError(f"set {' and '.join(missing)}: the cairn binary and the recorded sessions (shared/transcripts)")
    if not os.access(CAIRN, os.X_OK):
        raise RuntimeError(f"CAIRN_BIN={CAIRN} is not an executable")
    if not list((SHARED / "openai-chat").glob("*.json")) or not list((SHARED / "pi").glob("*.jsonl")):
        raise RuntimeError(f"CAIRN_SHARED={SHARED} has no openai-chat/*.json or pi/*.jsonl sessions")


def openhands_session() -> Path:
    """The OpenHands run with a 30 kB `ls -R` output early on: compaction has something to elide."""
    sessions = sorted((SHARED / "openai-chat").glob("*.json"))
    return next((p for p in sessions if "moto" in p.name), sessions[0])


def pi_session() -> Path:
    sessions = sorted((SHARED / "pi").glob("*.jsonl"), key=lambda p: p.stat().st_size)
    return sessions[0]


class Client:
    """One MCP session with `cairn serve`; `call` returns a tool's structured result."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def raw(self, tool: str, arguments: dict[str, Any]):
        return await self.session.call_tool(tool, arguments)

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.raw(tool, arguments)
        text = result.content[0].text if result.content else ""
        assert not result.is_error, f"{tool}({_short(arguments)}) failed: {text}"
        assert isinstance(result.structured_content, dict), f"{tool}: no structured content: {result}"
        assert json.loads(text) == result.structured_content, f"{tool}: content[0].text is not the structured result"
        return result.structured_content

    async def error(self, tool: str, **arguments: Any) -> str:
        result = await self.raw(tool, arguments)
        text = result.content[0].text if result.content else ""
        assert result.is_error, f"{tool}({_short(arguments)}) should fail, answered {text[:300]}"
        return text


def _short(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={str(v)[:40]!r}" for k, v in arguments.items())


def server_env() -> dict[str, str]:
    env = get_default_environment()
    env.update({k: v for k, v in os.environ.items() if k.startswith(("CAIRN_", "XDG_")) and k != "CAIRN_HOME"})
    env.setdefault("CAIRN_LOG", "info")
    return env


@contextlib.asynccontextmanager
async def serve(home: Path, *args: str, log: Path):
    """`cairn serve --home HOME ARGS…`, its stderr appended to `log` (shown when a test fails)."""
    params = StdioServerParameters(command=CAIRN, args=["serve", "--home", str(home), *args], env=server_env())
    with open(log, "a") as errlog:
        try:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    yield Client(session)
        except BaseException:
            errlog.flush()
            tail = log.read_text(errors="replace")[-3000:]
            print(f"\n--- cairn serve {' '.join(args)} stderr ({log}) ---\n{tail}", file=sys.stderr)
            raise


def events(home: Path, conversation: str) -> list[dict[str, Any]]:
    """The conversation's event log (`storage/log.rs`): one JSON object a line."""
    lines = (home / "conversations" / conversation / "events.jsonl").read_text().splitlines()
    parsed = []
    for number, line in enumerate(lines, 1):
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise AssertionError(f"events.jsonl line {number} is not JSON ({e}): {line[:200]}") from None
    return parsed


def placeholder_uris(text: str) -> list[str]:
    return re.findall(r"artifact://a-[0-9a-f]{16}/[0-9]+", text)


async def within(seconds: float, work) -> None:
    """Runs `work` with a deadline; an assertion failing inside the MCP client's task groups
    is reported as itself, not as a nested exception group."""
    try:
        async with asyncio.timeout(seconds):
            await work
    except BaseExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        raise leaf from None


def names(tools) -> set[str]:
    return {t.name for t in tools.tools}


class ServeTest(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="cairn-serve-test-"))
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.home = self.tmp / "home"
        self.log = self.tmp / "serve.log"
        self.openhands = openhands_session().read_text()

    def serve(self, *args: str, home: Path | None = None):
        return serve(home or self.home, *args, log=self.log)

    # ------------------------------------------------------------------------------------------
    async def test_lists_and_calls_every_tool(self) -> None:
        await within(60, self._every_tool())

    async def _every_tool(self) -> None:
        policy = self.tmp / "policy.toml"
        policy.write_text((REPO / "host/cairn/src/policy/default.toml").read_text())
        moto = json.loads(self.openhands)["messages"]
        pi_path = pi_session()
        pi_text = pi_path.read_text()
        pi_ids = {f"e{i}" for i in range(len(pi_text.splitlines()))} | {
            json.loads(line).get("id") for line in pi_text.splitlines() if line.strip()
        }

        for expose, expected in (("agent", AGENT_TOOLS), ("harness", HARNESS_TOOLS)):
            async with self.serve("--expose", expose, "--conversation", "agent-view") as c:
                self.assertEqual(names(await c.session.list_tools()), expected, f"--expose {expose}")
        async with self.serve("--conversation", "agent-view") as c:
            self.assertEqual(names(await c.session.list_tools()), HARNESS_TOOLS, "the default --expose is harness")

        async with self.serve("--expose", "all", "--conversation", "agent-view", "--policy", str(policy), "--no-watch") as c:
            tools = (await c.session.list_tools()).tools
            self.assertEqual({t.name for t in tools}, HARNESS_TOOLS | AGENT_TOOLS)
            for tool in tools:
                self.assertEqual(tool.input_schema.get("type"), "object", f"{tool.name}: input schema {tool.input_schema}")

            # plugins_list: the bundled plugins, and the policy this server runs, from our file.
            listed = await c.call("plugins_list")
            plugin_names = {p["name"] for p in listed["plugins"]}
            self.assertTrue({"shake-elide", "handover", "trigger-default", "commit-turn-boundary"} <= plugin_names, plugin_names)
            for p in listed["plugins"]:
                self.assertTrue({"name", "kind", "version", "imports", "wasi", "cached", "source"} <= p.keys(), p)
            self.assertEqual(listed["policy"]["source"], str(policy))
            self.assertTrue(listed["policy"]["chain"][0].startswith("shake-elide"), listed["policy"])
            self.assertTrue(listed["policy"]["handover"][0].startswith("handover"), listed["policy"])
            generation = listed["policy"]["generation"]

            # compact, Pi input: a shorter context, written back as a Pi session, and what Pi
            # itself needs: the summary of the prefix and the first entry it keeps.
            pi = await c.call("compact", conversation="tools-pi", transcript=pi_text)
            self.assertLess(pi["tokens_after"], pi["tokens_before"])
            self.assertIsNotNone(pi["committed_by"])
            self.assertEqual(pi["format"], "pi", "the answer comes back in the caller's format")
            lines = [json.loads(line) for line in pi["transcript"].splitlines()]
            self.assertEqual((lines[0]["type"], lines[0]["version"]), ("session", 3))
            self.assertIn(pi["first_kept_entry_id"], pi_ids, "first_kept_entry_id names an entry of the input")
            self.assertIsInstance(pi["prefix_summary"], str)
            self.assertGreater(len(pi["prefix_summary"]), 0)
            self.assertTrue(pi["archive_id"].startswith("a-"))
            self.assertTrue(all(s["plugin"] and s["outcome"] for s in pi["steps"]), pi["steps"])

            # compact, OpenHands input: the answer is OpenAI chat again, with placeholders whose
            # artifacts hold the originals byte for byte.
            oh = await c.call("compact", conversation="tools-openhands", transcript=self.openhands)
            self.assertEqual(oh["format"], "openai")
            self.assertLess(oh["tokens_after"], oh["tokens_before"])
            self.assertTrue(oh["committed_by"].startswith("shake-elide"), oh["committed_by"])
            self.assertFalse(oh["degraded"])
            self.assertTrue(oh["artifacts"], "shake-elide set tool outputs aside")
            compacted = json.loads(oh["transcript"])
            compacted = compacted["messages"] if isinstance(compacted, dict) else compacted
            originals = {m["tool_call_id"]: m["content"] for m in moto if m["role"] == "tool"}
            checked = 0
            for message in compacted:
                if message["role"] != "tool" or not isinstance(message.get("content"), str):
                    continue
                for uri in placeholder_uris(message["content"]):
                    self.assertIn(uri, oh["artifacts"])
                    artifact = await c.call("artifact_get", uri=uri)
                    self.assertEqual(artifact["uri"], uri)
                    self.assertEqual(artifact["content"], originals[message["tool_call_id"]], f"{uri} is the original output")
                    self.assertEqual(artifact["bytes"], len(artifact["content"].encode()))
                    checked += 1
            self.assertGreater(checked, 0, "the compacted transcript names its artifacts in placeholders")
            self.assertIn("artifact", (await c.error("artifact_get", uri="artifact://a-0000000000000000/1")).lower())

            # A dry run writes nothing; show lists the compaction; a pin; undo gives the
            # OpenHands context back as it was, in its own format.
            dry = await c.call("compact", conversation="tools-openhands", transcript=self.openhands, dry_run=True)
            self.assertTrue(dry["dry_run"] and dry["committed"], dry)
            shown = await c.call("show", conversation="tools-openhands")
            self.assertEqual([m["archive_id"] for m in shown["timeline"]["moments"] if m["kind"] == "compaction"], [oh["archive_id"]], "the dry run is not in the record")
            view = (await c.call("show", conversation="tools-openhands", archive_id=oh["archive_id"]))["compaction"]
            elided = [entry for stage in view["stages"] for entry in stage["elided"]["entries"]]
            self.assertTrue(elided and all(e["uris"] for e in elided), "the view names what was elided, with its URIs")
            pinned = await c.call("pin", conversation="tools-openhands", ids=[elided[0]["id"]])
            self.assertEqual(pinned["pinned"], [elided[0]["id"]])
            undone = await c.call("undo", conversation="tools-openhands", transcript=oh["transcript"])
            self.assertEqual(undone["undone"], [oh["archive_id"]])
            restored = json.loads(undone["transcript"])
            restored = restored["messages"] if isinstance(restored, dict) else restored
            # (The OpenAI writer answers the session's last, unanswered call with a placeholder
            # result; that came back in the harness's context and stays after the undo.)
            self.assertEqual([m.get("content") or "" for m in restored[: len(moto)]], [m.get("content") or "" for m in moto], "undo restores every message")
            self.assertTrue(all(m.get("content") == "[no result recorded]" for m in restored[len(moto) :]), restored[len(moto) :])
            self.assertIn("no compaction to undo", await c.error("undo", conversation="tools-openhands"))

            # Errors are tool results naming what was wrong.
            broken = "\n".join(pi_text.splitlines()[:3] + ['{"type": "message", broken'] + pi_text.splitlines()[3:6])
            message = await c.error("compact", conversation="tools-pi", transcript=broken)
            self.assertRegex(message, r"\b4\b", f"the error names line 4: {message}")
            message = await c.error("compact", conversation="Not A Key!", transcript=self.openhands)
            self.assertIn("Not A Key!", message)

            # handover: the seed of a fresh session.
            ho = await c.call("handover", conversation="tools-handover", transcript=self.openhands)
            self.assertIsNotNone(ho["committed_by"])
            self.assertIsInstance(ho["seed"], str)
            self.assertGreater(len(ho["seed"]), 0)
            self.assertEqual(ho["format"], "openai")
            self.assertLess(ho["tokens_after"], ho["tokens_before"])

            # boundary: far over a small window, at a safe point, Cairn compacts and says so.
            b = await c.call("boundary", conversation="tools-boundary", turn=1, transcript=self.openhands, window=8000)
            self.assertEqual(b["turn"], 1)
            self.assertEqual(b["action"]["kind"], "compacted", b["action"])
            self.assertGreater(b["usage"], 8000 * 3 // 4)
            self.assertLess(b["report"]["tokens_after"], b["report"]["tokens_before"])
            self.assertEqual(b["format"], "openai")
            after = json.loads(b["transcript"])
            after = after["messages"] if isinstance(after, dict) else after
            self.assertLess(len(json.dumps(after)), len(json.dumps(moto)))
            self.assertTrue(b["notices"], "a compaction at a boundary sends a notice")
            # …and a tool call still running defers it.
            d = await c.call(
                "boundary", conversation="tools-deferred", turn=1, transcript=self.openhands, window=8000, tool_call_outstanding=True
            )
            self.assertEqual(d["action"]["kind"], "deferred", d["action"])
            self.assertIsNone(d["report"])

            # notices: taken until acknowledged, then gone.
            taken = await c.call("notices_take", conversation="tools-boundary")
            ids = [n["id"] for n in taken["notices"] if n["kind"] != "policy"]
            self.assertEqual(set(ids), set(b["notices"]))
            self.assertTrue(all({"id", "kind", "text", "at"} <= n.keys() for n in taken["notices"]))
            self.assertIn("compacted", {n["kind"] for n in taken["notices"]})
            again = await c.call("notices_take", conversation="tools-boundary")
            self.assertEqual([n["id"] for n in again["notices"] if n["kind"] != "policy"], ids, "delivered until acknowledged")
            acked = await c.call("notices_ack", conversation="tools-boundary", ids=ids)
            self.assertEqual(acked["acknowledged"], len(ids))
            left = await c.call("notices_take", conversation="tools-boundary")
            self.assertEqual([n for n in left["notices"] if n["kind"] != "policy"], [])

            # request: recorded for the next boundary the cooldown allows.
            r = await c.call("request", conversation="tools-request", kind="handover", preserve="the fix", resume="run the tests")
            self.assertIs(r["recorded"], True)
            self.assertIsInstance(r["message"], str)

            # policy_set: switch automatic maintenance off (checked after a restart, below).
            s = await c.call("policy_set", conversation="tools-overlay", maintenance=False)
            self.assertIs(s["overlay"]["maintenance"], False)
            self.assertIs(s["paused"], False)

            # policy_reload (--no-watch): an edited policy is swapped in on request.
            policy.write_text(policy.read_text().replace("min_tokens = 200", "min_tokens = 300"))
            reloaded = await c.call("policy_reload")
            self.assertIs(reloaded["swapped"], True, reloaded)
            self.assertFalse(reloaded.get("error"))
            self.assertEqual(reloaded["policy"]["generation"], generation + 1)
            self.assertEqual((await c.call("plugins_list"))["policy"]["generation"], generation + 1)

            # The agent tools act on the server's conversation (--conversation agent-view).
            await c.call("compact", conversation="agent-view", transcript=self.openhands)
            summary = await c.call("session_history", action="summary")
            self.assertIn("1 archived compaction", summary["text"])
            hits = await c.call("session_history", action="search", query="CHANGELOG")
            self.assertGreater(hits["total"], 0, "the elided `ls -R` output lists CHANGELOG.md")
            hit = hits["hits"][0]
            page = await c.call(
                "session_history", action="page", archive_id=hit["archive_id"], offset=hit["index"], limit=1, char_offset=hit["char_offset"]
            )
            self.assertTrue(page["entries"][0]["text"].lower().startswith("changelog"), page["entries"][0]["text"][:100])
            self.assertEqual(page["archive_id"], hit["archive_id"])
            clamped = await c.call("session_history", action="page", archive_id=hit["archive_id"], limit=1000)
            self.assertTrue(clamped.get("clamped"), "a page larger than the bound says it was clamped")
            asked = await c.call("context_maintenance", action="compact", preserve="the reproduction", resume="re-run it")
            self.assertIs(asked["recorded"], True)
            self.assertIn("turn", asked["message"])

        # After a restart: the overlay persisted, and automatic maintenance stays off.
        async with self.serve("--policy", str(policy), "--no-watch") as c:
            s = await c.call("policy_set", conversation="tools-overlay")
            self.assertIs(s["overlay"]["maintenance"], False, "policy_set persists across a restart")
            b = await c.call("boundary", conversation="tools-overlay", turn=1, transcript=self.openhands, window=8000)
            self.assertEqual(b["action"]["kind"], "deferred", b["action"])
            s = await c.call("policy_set", conversation="tools-overlay", maintenance=True)
            self.assertIs(s["overlay"]["maintenance"], True)
            b = await c.call("boundary", conversation="tools-overlay", turn=2, transcript=self.openhands, window=8000)
            self.assertEqual(b["action"]["kind"], "compacted", b["action"])

    # ------------------------------------------------------------------------------------------
    def test_harness_example_runs(self) -> None:
        started = time.monotonic()
        run = subprocess.run(
            [sys.executable, str(HERE / "harness.py"), "--cairn", CAIRN, "--transcript", str(openhands_session()), "--json"],
            capture_output=True,
            text=True,
            timeout=90,
            env={**os.environ, "CAIRN_LOG": "warn"},
        )
        self.assertEqual(run.returncode, 0, run.stderr[-3000:])
        report = json.loads(run.stdout)
        self.assertGreaterEqual(report["compactions"], 1, run.stderr)
        self.assertEqual(report["turns"], sum(1 for m in json.loads(self.openhands)["messages"] if m["role"] == "assistant"))
        self.assertTrue(report["request"]["recorded"])
        history = report["history"]
        self.assertIsNotNone(history["query"], run.stderr)
        self.assertGreater(history["hits"], 0, run.stderr)
        self.assertTrue(history["found"], f"session_history paged back the elided text: {history}")
        self.assertLess(time.monotonic() - started, 60)

    # ------------------------------------------------------------------------------------------
    async def test_incremental_boundaries_send_less_and_decide_alike(self) -> None:
        await within(120, self._incremental())

    async def _replay(self, incremental: bool) -> dict[str, Any]:
        sys.path.insert(0, str(HERE))
        import harness

        home = self.tmp / ("incremental" if incremental else "whole")
        messages = harness.load_messages(openhands_session())
        async with stdio_client(harness.server_parameters(CAIRN, str(home), "replay")) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                h = harness.Harness(harness.Cairn(session), "replay", harness.DEFAULT_WINDOW, lambda line: None, incremental=incremental)
                return await h.run(messages)

    async def _incremental(self) -> None:
        whole, incremental = await self._replay(False), await self._replay(True)
        print(f"\nbytes of transcript sent over {whole['turns']} boundaries: {whole['bytes_sent']} whole, {incremental['bytes_sent']} incremental", file=sys.stderr)
        self.assertEqual(incremental["whole_calls"], 1, incremental)
        self.assertEqual(incremental["diverged"], 0)
        self.assertLess(incremental["bytes_sent"] * 3, whole["bytes_sent"])
        self.assertEqual(whole["actions"], incremental["actions"])
        self.assertGreaterEqual(whole["compactions"], 1)
        pick = lambda report: [(m["turn"], m["kind"], m["committed_by"]) for m in report["maintenance"]]
        self.assertEqual(pick(whole), pick(incremental))
        self.assertEqual(whole["final_messages"], incremental["final_messages"])

        # An earlier message edited: resent from there with `since`, its successors are known
        # entries: `diverged`; the whole transcript once, then incremental again.
        messages = json.loads(self.openhands)["messages"][:6]
        common = dict(conversation="edit", window=10_000_000, usage="counted")
        async with self.serve() as c:
            out = await c.call("boundary", turn=1, transcript=json.dumps(messages[:4]), **common)
            out = await c.call("boundary", turn=2, transcript=json.dumps(messages[4:5]), since=out["acknowledged"], **common)
            self.assertEqual(out["transcript"], "", "nothing changed: no context comes back")
            edited = [dict(messages[1], content="Something else entirely.")] + messages[2:6]
            error = await c.error("boundary", turn=3, transcript=json.dumps(edited), since=out["acknowledged"], **common)
            self.assertTrue(error.startswith("diverged:"), error)
            self.assertIn("send the whole transcript once", error)
            # The example harness matches on the failure's code, not its text.
            sys.path.insert(0, str(HERE))
            import harness

            with self.assertRaises(harness.CairnError) as raised:
                await harness.Cairn(c.session).call("boundary", turn=3, transcript=json.dumps(edited), since=out["acknowledged"], **common)
            self.assertEqual(raised.exception.code, "diverged", raised.exception)
            history = [messages[0]] + edited
            out = await c.call("boundary", turn=3, transcript=json.dumps(history), **common)
            extra = {"role": "user", "content": "Carry on."}
            out = await c.call("boundary", turn=4, transcript=json.dumps([extra]), since=out["acknowledged"], include_transcript=True, **common)
            context = json.loads(out["transcript"])
            context = context["messages"] if isinstance(context, dict) else context
            self.assertEqual(context[1]["content"], "Something else entirely.")
            self.assertEqual(len(context), len(history) + 1)

    # ------------------------------------------------------------------------------------------
    async def test_a_workspace_file_changed_after_compaction_is_stale(self) -> None:
        await within(60, self._stale_files())

    async def _stale_files(self) -> None:
        workspace = self.tmp / "ws"
        (workspace / "src").mkdir(parents=True)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Read every module, then tidy them."}]
        for i in range(40):
            path = f"src/module_{i}.py"
            (workspace / path).write_text(f"def f{i}():\n    return {i}\n")
            call = f"call-{i}"
            messages.append({"role": "assistant", "content": f"Reading {path}.", "tool_calls": [
                {"id": call, "type": "function", "function": {"name": "read", "arguments": json.dumps({"path": path})}}]})
            messages.append({"role": "tool", "tool_call_id": call, "content": f"def f{i}():\n    return {i}\n" + "# filler line\n" * 300})
        transcript = json.dumps(messages)
        async with self.serve("--workspace", str(workspace), "--no-watch") as c:
            compacted = await c.call("compact", conversation="ws", transcript=transcript, include_transcript=False)
            self.assertIsNotNone(compacted["committed_by"])
            quiet = await c.call("boundary", conversation="ws", turn=2, transcript=transcript, window=10_000_000, include_transcript=False)
            self.assertEqual(quiet["stale_files"], [])
            (workspace / "src/module_3.py").write_text("def f3():\n    return 'changed'\n")
            (workspace / "src/module_7.py").unlink()
            stale = await c.call("boundary", conversation="ws", turn=3, transcript=transcript, window=10_000_000, include_transcript=False)
            self.assertEqual(sorted((f["path"], f["change"]) for f in stale["stale_files"]),
                             [("src/module_3.py", "changed"), ("src/module_7.py", "deleted")])

    # ------------------------------------------------------------------------------------------
    async def test_two_servers_serialize_one_conversation(self) -> None:
        await within(90, self._two_servers())

    async def _two_servers(self) -> None:
        key = "shared-conversation"
        async with contextlib.AsyncExitStack() as stack:
            a = await stack.enter_async_context(self.serve())
            b = await stack.enter_async_context(self.serve())
            calls = [(a if i % 2 == 0 else b).call("compact", conversation=key, transcript=self.openhands) for i in range(50)]
            results = await asyncio.gather(*calls)

        self.assertTrue(all(r["committed_by"] for r in results), [r["committed_by"] for r in results])
        result_ids = [r["archive_id"] for r in results]
        self.assertEqual(len(set(result_ids)), 50, "every call archived under its own id")

        log = events(self.home, key)
        snapshots = [e for e in log if e.get("kind") == "snapshot"]
        self.assertEqual(len(snapshots), 1, "each writer saw the record as the previous one left it: the entries are recorded once")
        compactions = [e for e in log if e.get("kind") == "compaction"]
        self.assertEqual(len(compactions), 50, "one compaction event per committed call")
        self.assertEqual(sorted(e["archive_id"] for e in compactions), sorted(result_ids))
        for archive_id in result_ids:
            self.assertTrue((self.home / "conversations" / key / "archives" / archive_id).is_dir(), archive_id)

        history = subprocess.run(
            [CAIRN, "history", "--home", str(self.home), "--conversation", key, "summary"], capture_output=True, text=True, timeout=30
        )
        self.assertEqual(history.returncode, 0, history.stderr)
        self.assertIn("50 archived compaction(s)", history.stdout)

    # ------------------------------------------------------------------------------------------
    async def test_policy_swap_under_load(self) -> None:
        await within(90, self._policy_swap())

    async def _policy_swap(self) -> None:
        (self.tmp / "policies").mkdir()
        policy = self.tmp / "policies" / "policy.toml"
        policy.write_text(OLD_CHAIN)
        shown = re.escape(str(policy))

        async with self.serve("--policy", str(policy)) as c:
            g0 = (await c.call("plugins_list"))["policy"]["generation"]

            def old(r: dict[str, Any]) -> bool:
                return r["committed_by"].startswith("shake-elide") and len(r["steps"]) == 1

            def new(r: dict[str, Any]) -> bool:
                return (
                    r["committed_by"].startswith("last-resort")
                    and r["steps"][0]["plugin"].startswith("shake-elide")
                    and r["steps"][0]["outcome"] != "ok"
                )

            async def compact(key: str) -> dict[str, Any]:
                return await c.call("compact", conversation=key, transcript=self.openhands)

            first = await compact("held")
            self.assertTrue(old(first), first["steps"])

            # Calls in flight when the policy changes: they wait for the conversation, whose
            # lock this test holds (as another process writing to it would).
            lock = open(self.home / "conversations" / "held" / "lock", "a")
            self.addCleanup(lock.close)
            fcntl.flock(lock, fcntl.LOCK_EX)
            held = [asyncio.create_task(compact("held")) for _ in range(2)]

            # …and a steady stream of calls on another conversation.
            stream: list[tuple[float, float, dict[str, Any]]] = []
            stop = asyncio.Event()

            async def keep_compacting() -> None:
                while not stop.is_set():
                    started = time.monotonic()
                    result = await compact("stream")
                    stream.append((started, time.monotonic(), result))

            streamer = asyncio.create_task(keep_compacting())
            await asyncio.sleep(0.8)
            self.assertFalse(any(t.done() for t in held), "calls on a locked conversation wait for it")

            written = time.monotonic()
            with open(policy, "w") as f:  # rewritten in place, as `cat > policy.toml` does
                f.write(NEW_CHAIN)
            generation = await self._wait_for_generation(c, g0)
            seen = time.monotonic()
            self.assertEqual(generation, g0 + 1, "one edit, one swap")
            while sum(1 for started, _, _ in stream if started > seen) < 3:
                await asyncio.sleep(0.05)
            stop.set()
            await streamer

            fcntl.flock(lock, fcntl.LOCK_UN)
            for result in await asyncio.gather(*held):
                self.assertTrue(old(result), f"a call made before the swap finishes on the old chain: {result['steps']}")

            before = [r for started, ended, r in stream if ended < written]
            after = [r for started, ended, r in stream if started > seen]
            self.assertTrue(before and after, (len(before), len(after)))
            for r in before:
                self.assertTrue(old(r), r["steps"])
            for r in after:
                self.assertTrue(new(r), r["steps"])
            for _, _, r in stream:
                self.assertTrue(old(r) or new(r), f"one chain or the other, never a mix: {r['steps']}")

            # The swap is announced to the harness.
            swapped = await self._wait_for_policy_notice(c, lambda n: True)
            await c.call("notices_ack", conversation="stream", ids=[n["id"] for n in swapped])

            # A broken policy (saved by rename, as editors do) is refused with where it broke;
            # the last good one keeps running.
            self._replace(policy, SYNTAX_ERROR)
            refused = await self._wait_for_policy_notice(c, lambda n: policy.name in n["text"])
            self.assertTrue(
                any(re.search(shown + r"(:\d+:\d+|.*line \d+, column \d+)", n["text"], re.S) for n in refused),
                f"the notice names file:line:column: {refused}",
            )
            reloaded = await c.call("policy_reload")
            self.assertIs(reloaded["swapped"], False)
            self.assertRegex(reloaded["error"] or "", shown + r"(:\d+:\d+|.*line \d+, column \d+)")
            self.assertEqual(reloaded["policy"]["generation"], generation)
            self.assertTrue(new(await compact("stream")), "still the last good policy")

            self._replace(policy, UNKNOWN_PLUGIN)
            reloaded = await c.call("policy_reload")
            self.assertIs(reloaded["swapped"], False)
            self.assertRegex(reloaded["error"] or "", shown + r":2:\d+")
            self.assertIn("no-such-plugin", reloaded["error"])
            self.assertEqual((await c.call("plugins_list"))["policy"]["generation"], generation)
            self.assertTrue(new(await compact("stream")), "still the last good policy")

    async def _wait_for_generation(self, c: Client, previous: int, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            generation = (await c.call("plugins_list"))["policy"]["generation"]
            if generation > previous:
                await asyncio.sleep(0.5)  # an editor's save can arrive as several writes: let it settle
                return (await c.call("plugins_list"))["policy"]["generation"]
            await asyncio.sleep(0.1)
        self.fail(f"the policy watcher did not swap within {timeout}s")

    async def _wait_for_policy_notice(self, c: Client, matches, timeout: float = 20.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            taken = (await c.call("notices_take", conversation="stream"))["notices"]
            found = [n for n in taken if n["kind"] == "policy" and matches(n)]
            if found:
                return found
            await asyncio.sleep(0.1)
        self.fail(f"no `policy` notice within {timeout}s")

    @staticmethod
    def _replace(path: Path, text: str) -> None:
        temporary = path.with_name(path.name + ".new")
        temporary.write_text(text)
        os.replace(temporary, path)


if __name__ == "__main__":
    unittest.main()
