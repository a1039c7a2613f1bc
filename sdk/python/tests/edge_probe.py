"""Runs the exported classes against componentize-py's generated bindings of one world, in
plain CPython: `python3 edge_probe.py WORLD` with the bindings and the SDK on PYTHONPATH.
The WIT imports are replaced by recording fakes, so what crosses the edge can be inspected.
Used by test_export.py; prints `ok` when every check passed."""

from __future__ import annotations

import dataclasses
import sys

import wit_world
from componentize_py_types import Err
from wit_world.imports import log as wlog
from wit_world.imports import types as wt

import cairn_sdk as sdk

logged: list[tuple[str, str]] = []
wlog.log = lambda level, message: logged.append((level.name, message))


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


def wit_entry(id: str, *parts: object, pinned: bool = False) -> wt.Entry:  # noqa: A002
    return wt.Entry(id, wt.Role.ASSISTANT, wt.Origin.AGENT, list(parts), 7, 3, pinned)


def strategy() -> None:
    from wit_world.imports import archive, conversation, model, tokens

    tokens.count = lambda text: len(text)
    stored: list[str] = []

    def put(content: str) -> str:
        if content == "refuse":
            raise Err(archive.ArchiveError_Denied("archive:write is not granted"))
        stored.append(content)
        return f"artifact://a-1/{len(stored)}"

    archive.put_artifact = put

    def complete(request: model.CompletionRequest) -> str:
        if request.max_tokens == 0:
            raise Err(model.ModelError_Denied("not granted"))
        return "|".join(f"{m.role}:{m.content}" for m in request.messages)

    model.complete = complete

    calls: list[str] = []

    class LentHistory(conversation.History):
        """The host's resource, over generated entries; records what crossed."""

        def __init__(self, entries: list[wt.Entry]) -> None:
            self.held = entries

        def len(self) -> int:
            calls.append("len")
            return len(self.held)

        def entries(self, start: int, end: int) -> list[wt.Entry]:
            calls.append(f"entries {start} {end}")
            return self.held[start:end]

        def outlines(self, start: int, end: int) -> list[wt.EntryOutline]:
            calls.append(f"outlines {start} {end}")
            out = []
            for e in self.held[start:end]:
                parts = [
                    wt.PartOutline_ToolResult(wt.ToolResultOutline(p.value.call_id, len(p.value.content), p.value.is_error, p.value.elided))
                    if isinstance(p, wt.Part_ToolResult)
                    else wt.PartOutline_ToolCall(p.value) if isinstance(p, wt.Part_ToolCall)
                    else wt.PartOutline_Placeholder(p.value) if isinstance(p, wt.Part_Placeholder)
                    else wt.PartOutline_Text(len(p.value)) if isinstance(p, wt.Part_Text)
                    else wt.PartOutline_Image(len(p.value)) if isinstance(p, wt.Part_Image)
                    else wt.PartOutline_Thinking(len(p.value))
                    for p in e.parts
                ]
                out.append(wt.EntryOutline(e.id, e.role, e.origin, parts, e.tokens, e.turn, e.pinned))
            return out

        def part_text(self, index: int, part: int) -> str | None:
            calls.append(f"part_text {index} {part}")
            return self.held[index].parts[part].value.content

        def part_tokens(self, index: int, part: int) -> int | None:
            calls.append(f"part_tokens {index} {part}")
            return None if index >= len(self.held) else 11

        def set_aside(self, index: int, part: int) -> str:
            calls.append(f"set_aside {index} {part}")
            return put(self.held[index].parts[part].value.content)

    class Echo(sdk.Strategy):
        """Masks every tool result and reports what it saw through the capabilities."""

        def compact(self, request: sdk.CompactRequest) -> sdk.Outcome:
            match request.config:
                case "nothing":
                    raise sdk.NothingToDo("nothing here")
                case "crash":
                    return {"not": "an outcome"}["missing"]  # KeyError
                case "wrong":
                    return "an outcome"  # type: ignore[return-value]
                case "refuse":
                    sdk.store_artifact("refuse")
                case "model":
                    expect(sdk.ask_model("s", "u", 10) == "system:s|user:u", "model call")
                    expect(sdk.ask_model_or_fallback("s", "u", 0, "extract") is None, "denied model falls back")
                case "in place":
                    # Changed in place: the snapshot taken before `compact` tells it from the original.
                    request.entries[2].parts[0] = sdk.Text("changed in place")
                    return sdk.Outcome(sdk.range_of(request.entries, 1, 3), request.entries[1:4])
            sdk.log_info(f"{len(request.entries)} entries, purpose {request.purpose.name}, tokens {sdk.count_tokens('four')}")
            entries = request.entries
            first = entries[0]
            expect(isinstance(first.parts[1], sdk.ToolCall) and first.role is sdk.Role.ASSISTANT, "parts and enums convert")
            expect(entries[1].parts[0] == sdk.ToolResult("c1", "long output", True, None), "results convert")
            expect(entries[0].parts[2] == sdk.Placeholder("[p]", None) and entries[0].parts[3] == sdk.Image("img"), "placeholders and images")
            changed = {}
            for i, entry in enumerate(entries):
                parts = [
                    sdk.ToolResult(p.call_id, "[masked]", p.is_error, sdk.store_artifact(p.content)) if isinstance(p, sdk.ToolResult) else p
                    for p in entry.parts
                ]
                if parts != entry.parts:
                    changed[i] = sdk.Entry(entry.id, entry.role, entry.origin, parts, 0, entry.turn, entry.pinned)
            outcome = sdk.changed_range_outcome(entries, changed)
            assert outcome is not None
            outcome.checkpoint = "{}"
            return outcome

    world = sdk.export_strategy(Echo)
    expect(wit_world.WitWorld in world.__mro__, "WitWorld subclasses the generated protocol")
    parts = [
        wt.Part_Text("a"), wt.Part_ToolCall(wt.ToolCall("c1", "bash", "{}")), wt.Part_Placeholder(wt.Placeholder("[p]", None)),
        wt.Part_Image("img"), wt.Part_Thinking("hm"),
    ]
    entries = [
        wit_entry("e1", *parts),
        wit_entry("e2", wt.Part_ToolResult(wt.ToolResult("c1", "long output", True, None))),
        wit_entry("e3", wt.Part_Text("kept as it was")),
        wit_entry("e4", wt.Part_ToolResult(wt.ToolResult("c1", "more output", False, None))),
        wit_entry("e5", wt.Part_Text("tail")),
    ]

    def request(config: str) -> wt.CompactRequest:
        # By name: the generated record may hold fields this probe does not set (left None).
        known = {"purpose": wt.RequestKind.COMPACT, "archive_id": "a-1", "protected_head": 0, "tail_start": 4, "token_target": 10, "config": config}
        return wt.CompactRequest(**{f.name: known.get(f.name) for f in dataclasses.fields(wt.CompactRequest)})

    outcome = world().compact(LentHistory(entries), request(""))
    expect(calls == ["len", "entries 0 5"], f"the default path reads every entry in one batch: {calls}")
    expect(isinstance(outcome, wt.Outcome) and outcome.replaced == wt.EntryRange("e2", "e4"), f"outcome {outcome}")
    masked, kept, masked_too = outcome.replacement
    expect(kept == wt.ReplacementEntry_Original(2), f"an unchanged entry goes back as its index: {kept}")
    expect(isinstance(masked, wt.ReplacementEntry_Entry) and isinstance(masked_too, wt.ReplacementEntry_Entry), "changed entries go back whole")
    masked = masked.value
    expect(masked.parts == [wt.Part_ToolResult(wt.ToolResult("c1", "[masked]", True, "artifact://a-1/1"))], f"parts back {masked.parts}")
    expect((masked.role, masked.origin, masked.turn) == (wt.Role.ASSISTANT, wt.Origin.AGENT, 3), "enums back")
    expect(outcome.checkpoint == "{}" and stored == ["long output", "more output"], "checkpoint and archive")
    expect(logged[-1] == ("INFO", "5 entries, purpose COMPACT, tokens 4"), f"log line {logged[-1]}")

    in_place = world().compact(LentHistory(entries), request("in place")).replacement
    expect([type(r).__name__ for r in in_place] == ["ReplacementEntry_Original", "ReplacementEntry_Entry", "ReplacementEntry_Original"], f"{in_place}")
    expect(in_place[1].value.parts == [wt.Part_Text("changed in place")], "an entry changed in place goes back whole")

    def error_of(config: str) -> object:
        try:
            world().compact(LentHistory(entries), request(config))
        except Err as e:
            return e.value
        raise AssertionError(f"{config}: no error")

    expect(error_of("nothing") == wt.StrategyError_NothingToDo("nothing here"), "NothingToDo crosses as nothing-to-do")
    crash = error_of("crash")
    expect(isinstance(crash, wt.StrategyError_Failed), f"a bug is failed: {crash}")
    expect(crash.value.startswith("KeyError: 'missing' (at edge_probe.py:"), f"what and where: {crash}")
    level, line = logged[-1]
    expect(level == "ERROR" and "Echo raised KeyError" in line and "in compact" in line, f"and logged {logged[-1]}")
    wrong = error_of("wrong")
    expect(isinstance(wrong, wt.StrategyError_Failed) and "compact returned str, not an Outcome" in wrong.value, f"{wrong}")
    expect(error_of("refuse") == wt.StrategyError_Unavailable("archive write: archive:write is not granted"), "archive errors map")
    world().compact(LentHistory(entries), request("model"))
    expect(("INFO", "model not granted: extract") in logged, "the model fallback logs")
    expect(sdk.host._current is None, "the host is uninstalled after the call")

    class Lean(sdk.Strategy):
        """Reads outlines and one part's size, sets that part aside without reading it."""

        def compact(self, request: sdk.CompactRequest) -> sdk.Outcome:
            raise AssertionError("compact_lent is defined: compact is not called")

        def compact_lent(self, history: sdk.History, request: sdk.LentRequest) -> sdk.Outcome:
            expect(request == sdk.LentRequest(sdk.RequestKind.COMPACT, "a-1", 0, 4, 10, config="lean"), f"the request converts: {request}")
            outlines = history.outlines(0, history.len())
            expect(outlines[1].parts == [sdk.ToolResultOutline("c1", 11, True, None)], f"outlines convert: {outlines[1]}")
            expect(outlines[0].parts[:2] == [sdk.TextOutline(1), sdk.ToolCall("c1", "bash", "{}")], f"{outlines[0].parts}")
            expect(history.part_tokens(1, 0) == 11 and history.part_tokens(9, 0) is None, "part tokens")
            expect(history.part_text(3, 0) == "more output", "part text")
            uri = history.set_aside(1, 0)
            masked = sdk.Entry("e2", sdk.Role.ASSISTANT, sdk.Origin.AGENT, [sdk.ToolResult("c1", "[masked]", True, uri)], 2, 3)
            return sdk.Outcome(sdk.EntryRange("e2", "e4"), [masked, sdk.Original(2), sdk.Original(3)])

    del calls[:], stored[:]
    lean = sdk.export_strategy(Lean)().compact(LentHistory(entries), request("lean"))
    expect(calls == ["len", "outlines 0 5", "part_tokens 1 0", "part_tokens 9 0", "part_text 3 0", "set_aside 1 0"], f"what crossed: {calls}")
    expect(lean.replacement[1:] == [wt.ReplacementEntry_Original(2), wt.ReplacementEntry_Original(3)], f"{lean.replacement}")
    expect(lean.replacement[0].value.parts == [wt.Part_ToolResult(wt.ToolResult("c1", "[masked]", True, "artifact://a-1/1"))], "set aside")

    class Refused(sdk.Strategy):
        def compact_lent(self, history: sdk.History, request: sdk.LentRequest) -> sdk.Outcome:
            history.set_aside(0, 0)
            raise AssertionError("unreachable")

    class DenyingHistory(LentHistory):
        def set_aside(self, index: int, part: int) -> str:
            raise Err(archive.ArchiveError_Denied("archive:write is not granted"))

    try:
        sdk.export_strategy(Refused)().compact(DenyingHistory(entries), request(""))
    except Err as e:
        expect(e.value == wt.StrategyError_Unavailable("archive write: archive:write is not granted"), f"a refused set-aside: {e.value}")
    else:
        raise AssertionError("a refused set-aside is an error")


def trigger() -> None:
    class Threshold(sdk.Trigger):
        def decide(self, input: sdk.TriggerInput) -> sdk.TriggerDecision | None:  # noqa: A002
            requested = sdk.pending_request_decision(input)
            if requested:
                return requested
            if input.config == "crash":
                raise ValueError("bad threshold")
            tokens = input.usage.context_tokens
            if tokens is None:
                return None
            if input.recent_outcomes == [sdk.OutcomeClass.NO_PROGRESS]:
                return sdk.Advise(f"at {tokens}")
            return sdk.Compact("full") if tokens > input.usage.window // 2 else None

    world = sdk.export_trigger(Threshold)

    def decide(tokens: int | None, outcomes: list = [], request: wt.AgentRequest | None = None, config: str = "") -> object:  # noqa: B006
        return world().decide(wt.TriggerInput(wt.Usage(tokens, 100, 10), 4, None, 0, request, outcomes, config))

    expect(decide(None) == wt.TriggerDecision_None_(), "None is none")
    expect(decide(80) == wt.TriggerDecision_Compact("full"), "compact")
    expect(decide(20, [wt.OutcomeClass.NO_PROGRESS]) == wt.TriggerDecision_Advise("at 20"), "outcome classes convert")
    handover = wt.AgentRequest(wt.RequestKind.HANDOVER, "p", "r")
    expect(decide(None, request=handover) == wt.TriggerDecision_Handover("handover requested by the agent"), "requests convert")
    try:
        decide(10, config="crash")
    except ValueError:
        expect("Threshold raised ValueError: bad threshold" in logged[-1][1], "logged before the trap")
    else:
        raise AssertionError("a trigger has no error channel: the exception must propagate (trap)")
    for wrong in (sdk.Strategy, sdk.CommitPolicy):
        try:
            {sdk.Strategy: sdk.export_strategy, sdk.CommitPolicy: sdk.export_commit_policy}[wrong](type("P", (wrong,), {}))
        except TypeError as e:
            expect("not built for the" in str(e), str(e))
        else:
            raise AssertionError(f"{wrong.__name__} exported into the trigger world")


def commit_policy() -> None:
    class Careful(sdk.CommitPolicy):
        def decide(self, boundary: sdk.Boundary, proposal: sdk.Proposal) -> sdk.CommitDecision:
            if boundary.tool_call_outstanding:
                return sdk.Defer("a tool call is running")
            if proposal.kept_summary_ids:
                return sdk.Reject(", ".join(proposal.kept_summary_ids))
            return sdk.Commit()

    world = sdk.export_commit_policy(Careful)
    proposal = wt.Proposal("s", 10, 5, ["e1"], [])
    expect(world().decide(wt.Boundary(1, True, False, ""), proposal) == wt.CommitDecision_Commit(), "commit")
    expect(world().decide(wt.Boundary(1, True, True, ""), proposal) == wt.CommitDecision_Defer("a tool call is running"), "defer")
    stale = wt.Proposal("s", 10, 5, ["e1"], ["s1", "s2"])
    expect(world().decide(wt.Boundary(1, True, False, ""), stale) == wt.CommitDecision_Reject("s1, s2"), "reject")
    try:
        sdk.export_trigger(type("T", (sdk.Trigger,), {}))
    except TypeError as e:
        expect("`trigger` world" in str(e), str(e))
    else:
        raise AssertionError("a trigger exported into the commit-policy world")
    try:
        sdk.export_commit_policy(object)  # type: ignore[arg-type]
    except TypeError as e:
        expect("takes a subclass of cairn_sdk.CommitPolicy" in str(e), str(e))


if __name__ == "__main__":
    {"strategy": strategy, "trigger": trigger, "commit-policy": commit_policy}[sys.argv[1]]()
    print("ok")
