#!/usr/bin/env python3
"""A harness that lets `cairn serve` manage its context, over MCP.

This is the loop an agent harness written in Python runs. It replays a recorded OpenHands
session (OpenAI chat JSON) as if the agent were producing it live:

    python3 harness.py --cairn cairn --transcript session.json --window 12000

What counts as a turn. OpenHands' agent loop calls the model, runs the tool calls the model
made, and calls the model again; its condenser looks at the history before every model call.
A recorded OpenHands session has one or two operator messages and a single assistant message
without tool calls (the final answer), so "a turn ends at an assistant message without tool
calls" or "a turn starts at a user message" would give one or two turns for a whole session.
This harness therefore treats each agent step as a turn: one assistant message together with
the results of its tool calls. Its boundary is the moment after the last tool result and
before the next model call: every tool call has its result (`tool_call_outstanding` false) and
nothing is half-written (`turn_complete` true), which is exactly when replacing the context
is safe.

At every boundary the harness:
  1. appends the step's messages to its working context (what the model would see next);
  2. calls `boundary` with that context — the first time whole, then only the messages
     appended since the entry Cairn acknowledged (`since`), and whole once more when Cairn
     answers `diverged`; Cairn's trigger and commit policy decide;
  3. acts on the decision: prints advice (a real harness appends it to the turn), replaces
     its working context with the returned `transcript` when Cairn compacted or handed over,
     and takes, shows and acknowledges notices when the boundary names some.
Half-way through, the agent asks for maintenance itself (`context_maintenance`, an agent
tool); Cairn runs it at a later boundary. At the end the agent looks back with
`session_history`: it searches for a word from a tool output it no longer sees, and pages the
archived original back.

Only the `mcp` package is needed (see requirements.txt). `--json` prints a report object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

DEFAULT_WINDOW = 12_000


class CairnError(RuntimeError):
    """A tool answered with `isError: true`: the message says what was wrong, `code` what kind
    of failure it is (`diverged`, `not-found`, `invalid-request`, `transcript-invalid`,
    `refused`, `forbidden`, `unavailable`, `internal`), the one to match on."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class Cairn:
    """The few lines a harness needs around an MCP session: call a tool, get its object."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.session.call_tool(tool, arguments)
        text = result.content[0].text if result.content and hasattr(result.content[0], "text") else ""
        if result.is_error:
            meta = result.meta or {}
            raise CairnError(f"{tool}: {text}", (meta.get("cairn/error") or {}).get("code"))
        # Every Cairn tool returns its answer as structured content (and the same JSON as text).
        if result.structured_content is not None:
            return result.structured_content
        return json.loads(text)


def server_parameters(cairn: str, home: str, conversation: str, extra: list[str] | None = None) -> StdioServerParameters:
    """`cairn serve` for one conversation, with every tool (a harness usually exposes only the
    agent tools to its model, and calls the harness tools itself)."""
    env = get_default_environment()
    # Pass Cairn's own settings through (the SDK inherits only a safe minimum by default).
    env.update({k: v for k, v in os.environ.items() if k.startswith(("CAIRN_", "XDG_"))})
    env.setdefault("CAIRN_LOG", "warn")
    args = ["serve", "--home", home, "--expose", "all", "--conversation", conversation, *(extra or [])]
    return StdioServerParameters(command=cairn, args=args, env=env)


def load_messages(path: Path) -> list[dict[str, Any]]:
    """An OpenHands run: `{"messages": [...], ...}` (or a bare array of chat messages)."""
    document = json.loads(path.read_text(encoding="utf-8"))
    messages = document["messages"] if isinstance(document, dict) else document
    if not isinstance(messages, list) or not messages:
        raise SystemExit(f"{path}: no chat messages")
    return messages


def agent_steps(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split a session into agent steps: everything up to and including one assistant message
    and what followed it (its tool results, an operator's reply) until the next assistant
    message. The system prompt and the task belong to the first step."""
    steps: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "assistant" and any(m.get("role") == "assistant" for m in current):
            steps.append(current)
            current = []
        current.append(message)
    if current:
        steps.append(current)
    return steps


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def set_aside(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """Texts the working context held before a compaction and no longer holds verbatim
    (elided tool outputs, dropped messages): what the agent might want to look up later."""
    kept = {message_text(m) for m in after}
    return [t for t in (message_text(m) for m in before) if len(t) > 200 and t not in kept]


def pick_query(texts: list[str], working: list[dict[str, Any]]) -> str | None:
    """A word from something set aside that the working context no longer contains: if the
    agent can find it, it came back from the archive."""
    visible = "\n".join(message_text(m) for m in working).lower()
    for text in sorted(texts, key=len, reverse=True):
        words = sorted(set(re.findall(r"[A-Za-z][A-Za-z0-9]{7,30}", text)), key=lambda w: (-len(w), w))
        for word in words:
            if word.lower() not in visible:
                return word
    return None


class Harness:
    def __init__(self, cairn: Cairn, conversation: str, window: int, say, incremental: bool = True) -> None:
        self.cairn = cairn
        self.conversation = conversation
        self.window = window
        self.say = say
        self.working: list[dict[str, Any]] = []
        # Incremental boundaries: the last entry Cairn acknowledged, and how many messages of
        # `working` it holds; from then on only the messages after them are sent.
        self.incremental = incremental
        self.acknowledged: str | None = None
        self.acknowledged_messages: list[dict[str, Any]] = []
        self.elided_texts: list[str] = []
        self.report: dict[str, Any] = {
            "conversation": conversation,
            "window": window,
            "turns": 0,
            "actions": {},
            "maintenance": [],
            "advice": [],
            "notices": [],
            "peak_tokens": 0,
            "request": None,
            "history": None,
            "bytes_sent": 0,
            "whole_calls": 0,
            "diverged": 0,
        }

    async def report_boundary(self, turn: int) -> dict[str, Any]:
        """One `boundary` call: after the first, only the messages appended since the context
        Cairn acknowledged (`since`); on `diverged` (the history is not the acknowledged one),
        the whole transcript once."""
        common = dict(
            conversation=self.conversation,
            turn=turn,
            window=self.window,
            usage="counted",  # a replay has no provider usage; let Cairn count the context
            turn_complete=True,
            tool_call_outstanding=False,
        )
        held = len(self.acknowledged_messages)
        # Only a pure append goes incrementally: a harness that edited or dropped what Cairn
        # holds sends the whole transcript (Cairn would answer `diverged` or, worse, not know).
        if self.incremental and self.acknowledged is not None and self.working[:held] == self.acknowledged_messages:
            appended = json.dumps(self.working[held:])
            self.report["bytes_sent"] += len(appended)
            try:
                return await self.cairn.call("boundary", transcript=appended, since=self.acknowledged, **common)
            except CairnError as error:
                if error.code != "diverged":
                    raise
                self.report["diverged"] += 1
        whole = json.dumps(self.working)
        self.report["bytes_sent"] += len(whole)
        self.report["whole_calls"] += 1
        return await self.cairn.call("boundary", transcript=whole, **common)

    async def boundary(self, turn: int) -> None:
        out = await self.report_boundary(turn)
        kind = out["action"]["kind"]
        self.report["actions"][kind] = self.report["actions"].get(kind, 0) + 1
        tokens = out.get("usage")
        if tokens:
            self.report["peak_tokens"] = max(self.report["peak_tokens"], tokens)
        line = f"turn {turn:>3}: {len(self.working):>3} messages, {tokens if tokens is not None else '?':>6} tokens  {kind}"
        if out["action"].get("reason"):
            line += f" ({out['action']['reason']})"

        if kind in ("compacted", "handed-over"):
            # Cairn's answer is the context the model sees from now on, in our own format.
            if out["format"] != "openai":
                raise CairnError(f"boundary answered in {out['format']!r}, expected 'openai'")
            before = self.working
            self.working = json.loads(out["transcript"])
            if isinstance(self.working, dict):
                self.working = self.working["messages"]
            self.elided_texts += set_aside(before, self.working)
            report = out.get("report") or {}
            line += f": {report.get('tokens_before')} → {report.get('tokens_after')} tokens by {report.get('committed_by')}, {len(self.working)} messages now"
            self.report["maintenance"].append(
                {
                    "turn": turn,
                    "kind": kind,
                    "committed_by": report.get("committed_by"),
                    "tokens_before": report.get("tokens_before"),
                    "tokens_after": report.get("tokens_after"),
                    "archive_id": report.get("archive_id"),
                    "degraded": report.get("degraded"),
                }
            )
            request = self.report["request"]
            if request and request["ran_at_turn"] is None and turn > request["turn"]:
                request["ran_at_turn"] = turn
        # What Cairn holds now ends with this entry: the next call sends only what follows.
        self.acknowledged = out.get("acknowledged")
        self.acknowledged_messages = list(self.working)
        self.say(line)

        if out.get("advice"):
            # A harness appends this line to the turn so the model sees it.
            self.say(f"           advice: {out['advice']}")
            self.report["advice"].append({"turn": turn, "text": out["advice"]})

        if out.get("notices"):
            taken = await self.cairn.call("notices_take", conversation=self.conversation)
            for notice in taken["notices"]:
                self.say(f"           notice [{notice['kind']}]: {notice['text']}")
                self.report["notices"].append({"turn": turn, "id": notice["id"], "kind": notice["kind"], "text": notice["text"]})
            if taken["notices"]:
                await self.cairn.call("notices_ack", conversation=self.conversation, ids=[n["id"] for n in taken["notices"]])

    async def agent_asks_for_maintenance(self, turn: int) -> None:
        """What the model does when it calls the `context_maintenance` tool."""
        out = await self.cairn.call(
            "context_maintenance",
            action="compact",
            preserve="the failing reproduction and the file being fixed",
            resume="re-run the reproduction script after the fix",
        )
        self.say(f"           agent → context_maintenance: {out['message']}")
        self.report["request"] = {"turn": turn, "recorded": out.get("recorded"), "message": out["message"], "ran_at_turn": None}

    async def look_back(self) -> None:
        """What the model does with `session_history` after its context was compacted."""
        summary = await self.cairn.call("session_history", action="summary")
        first = summary.get("text", "").splitlines()[:1]
        self.say(f"session_history summary: {first[0] if first else '(empty)'}")
        history: dict[str, Any] = {"summary": first[0] if first else "", "query": None, "hits": 0, "found": False}
        self.report["history"] = history
        query = pick_query(self.elided_texts, self.working)
        if query is None:
            self.say("session_history: nothing was set aside to look for")
            return
        history["query"] = query
        hits = await self.cairn.call("session_history", action="search", query=query, limit=3)
        history["hits"] = hits["total"]
        self.say(f"session_history search {query!r}: {hits['total']} hit(s)")
        if not hits["hits"]:
            return
        hit = hits["hits"][0]
        page = await self.cairn.call(
            "session_history", action="page", archive_id=hit["archive_id"], offset=hit["index"], limit=1, char_offset=hit["char_offset"]
        )
        text = page["entries"][0]["text"] if page["entries"] else ""
        history.update(archive_id=hit["archive_id"], entry_id=hit["entry_id"], found=query.lower() in text.lower(), excerpt=text[:200])
        self.say(f"session_history page {hit['archive_id']} entry {hit['index']} from char {hit['char_offset']}: {text[:120]!r}")

    async def run(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        steps = agent_steps(messages)
        ask_at = max(2, len(steps) // 2)
        for turn, step in enumerate(steps, start=1):
            self.working.extend(step)
            await self.boundary(turn)
            if turn == ask_at:
                await self.agent_asks_for_maintenance(turn)
        self.report["turns"] = len(steps)
        self.report["messages"] = len(messages)
        self.report["final_messages"] = len(self.working)
        self.report["compactions"] = sum(1 for m in self.report["maintenance"] if m["kind"] == "compacted")
        self.report["handovers"] = sum(1 for m in self.report["maintenance"] if m["kind"] == "handed-over")
        await self.look_back()
        return self.report


def conversation_key(transcript: Path) -> str:
    """Conversation keys are 1-64 chars of a-z 0-9 - _ . (starting with a letter or digit);
    one fresh key per run."""
    stem = re.sub(r"[^a-z0-9._-]+", "-", transcript.stem.lower())[-40:].strip("-._")
    return f"{stem or 'session'}-{uuid.uuid4().hex[:8]}"


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    messages = load_messages(args.transcript)
    home = args.home or tempfile.mkdtemp(prefix="cairn-harness-")
    conversation = conversation_key(args.transcript)
    out = sys.stderr if args.json else sys.stdout

    def say(line: str) -> None:
        print(line, file=out, flush=True)

    say(f"{args.transcript.name}: {len(messages)} messages; conversation {conversation} in {home}; window {args.window}")
    try:
        async with stdio_client(server_parameters(args.cairn, home, conversation)) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                harness = Harness(Cairn(session), conversation, args.window, say, incremental=not args.whole)
                report = await harness.run(messages)
    finally:
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)
    report["transcript"] = args.transcript.name
    report["home"] = args.home
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cairn", default="cairn", help="the cairn binary")
    parser.add_argument("--transcript", required=True, type=Path, help="an OpenHands session (OpenAI chat JSON)")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="the model's context window in tokens (small, so maintenance happens)")
    parser.add_argument("--home", help="keep Cairn's records here (default: a temporary home, removed afterwards)")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object (progress goes to stderr)")
    parser.add_argument("--whole", action="store_true", help="send the whole transcript at every boundary (default: only what is new, with `since`)")
    args = parser.parse_args()
    report = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        history = report["history"] or {}
        print(
            f"\n{report['turns']} turns: {report['compactions']} compaction(s), {report['handovers']} handover(s), "
            f"{len(report['advice'])} advice, {len(report['notices'])} notice(s); peak {report['peak_tokens']} tokens; "
            f"{report['messages']} messages replayed, {report['final_messages']} in the final context; "
            f"{report['bytes_sent']} bytes of transcript sent ({report['whole_calls']} whole call(s))"
        )
        request = report["request"]
        if request:
            ran = f"ran at turn {request['ran_at_turn']}" if request["ran_at_turn"] else "has not run yet"
            print(f"agent's maintenance request (turn {request['turn']}): {ran}")
        if history.get("query"):
            print(f"session_history found {history['query']!r} again: {'yes' if history['found'] else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
