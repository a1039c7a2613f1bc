"""Runs the exported classes against componentize-py's generated bindings of one world, in
plain CPython: `python3 edge_probe.py WORLD` with the bindings and the SDK on PYTHONPATH.
The WIT imports are replaced by recording fakes, so what crosses the edge can be inspected.
Used by test_export.py; prints `ok` when every check passed."""

from __future__ import annotations

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
    from wit_world.imports import archive, model, tokens

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
    entries = [wit_entry("e1", *parts), wit_entry("e2", wt.Part_ToolResult(wt.ToolResult("c1", "long output", True, None)))]

    def request(config: str) -> wt.CompactRequest:
        return wt.CompactRequest(wt.RequestKind.COMPACT, "a-1", entries, 0, 2, 10, None, None, None, config)

    outcome = world().compact(request(""))
    expect(isinstance(outcome, wt.Outcome) and outcome.replaced == wt.EntryRange("e2", "e2"), f"outcome {outcome}")
    (masked,) = outcome.replacement
    expect(masked.parts == [wt.Part_ToolResult(wt.ToolResult("c1", "[masked]", True, "artifact://a-1/1"))], f"parts back {masked.parts}")
    expect((masked.role, masked.origin, masked.turn) == (wt.Role.ASSISTANT, wt.Origin.AGENT, 3), "enums back")
    expect(outcome.checkpoint == "{}" and stored == ["long output"], "checkpoint and archive")
    expect(logged[-1] == ("INFO", "2 entries, purpose COMPACT, tokens 4"), f"log line {logged[-1]}")

    def error_of(config: str) -> object:
        try:
            world().compact(request(config))
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
    world().compact(request("model"))
    expect(("INFO", "model not granted: extract") in logged, "the model fallback logs")
    expect(sdk.host._current is None, "the host is uninstalled after the call")


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
