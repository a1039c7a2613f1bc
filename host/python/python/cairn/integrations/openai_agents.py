"""Cairn as the OpenAI Agents SDK's compaction: a model-input filter for a run.

Before each model call the filter reports a turn boundary to Cairn with the run's input items
(Responses items, mapped to chat messages). When the policy's trigger, cooldown and commit
policy say so, Cairn's chain compacts them and the model gets the compacted input, mapped back
to Responses items with every function call still answered::

    from agents import Agent, RunConfig, Runner, function_tool
    import cairn
    from cairn.integrations.openai_agents import input_filter, session_history_tool

    host = cairn.Host()
    agent = Agent(name="coder", tools=[..., session_history_tool(host, "my-session")])
    Runner.run_sync(agent, task, run_config=RunConfig(call_model_input_filter=input_filter(host, "my-session", window=128_000)))

Reasoning items are not carried into a compacted input (the provider does not need them).
Requires `openai-agents`, not a dependency of the `cairn` package.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional

from agents import FunctionTool, function_tool
from agents.run_config import CallModelData, ModelInputData

import cairn

__all__ = ["input_filter", "session_history_tool", "to_chat", "from_chat"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)
    return "" if content is None else json.dumps(content)


def _item(item: Any) -> Dict[str, Any]:
    if isinstance(item, dict):
        return item
    dumped: Dict[str, Any] = item.model_dump(exclude_unset=True)
    return dumped


def to_chat(items: List[Any]) -> List[Dict[str, Any]]:
    """Responses input items as OpenAI chat messages: consecutive function calls join the
    assistant message before them."""
    chat: List[Dict[str, Any]] = []
    for raw in items:
        item = _item(raw)
        kind = item.get("type", "message")
        if kind == "function_call":
            call = {"id": item["call_id"], "type": "function", "function": {"name": item["name"], "arguments": item.get("arguments", "{}")}}
            if chat and chat[-1]["role"] == "assistant":
                chat[-1].setdefault("tool_calls", []).append(call)
            else:
                chat.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            chat.append({"role": "tool", "tool_call_id": item["call_id"], "content": _text(item.get("output"))})
        elif kind == "message" or "role" in item:
            role = item.get("role", "user")
            role = "system" if role == "developer" else role
            chat.append({"role": role, "content": _text(item.get("content"))})
    return chat


def from_chat(chat: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """OpenAI chat messages as Responses input items."""
    items: List[Dict[str, Any]] = []
    for message in chat:
        role = message.get("role")
        content = _text(message.get("content"))
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"], "output": content})
            continue
        if content or role != "assistant":
            items.append({"role": role, "content": content})
        for call in message.get("tool_calls") or []:
            function = call["function"]
            items.append({"type": "function_call", "call_id": call["id"], "name": function["name"], "arguments": function["arguments"]})
    return items


def input_filter(host: cairn.Host, conversation: str, *, window: int, reserve: int = 4096) -> Callable[[CallModelData[Any]], ModelInputData]:
    """A `RunConfig.call_model_input_filter` that compacts through Cairn at the boundaries its
    policy chooses. Each model call is a turn (the policy's cooldown counts them).

    The SDK hands every call the run's whole history; a filter's answer lasts one call. So
    each call reports only the items appended since the last (``since``: Cairn's record holds
    the rest), and once Cairn has compacted, every call gets Cairn's working context — the
    compacted history and what came after — instead of the whole history."""
    state: Dict[str, Any] = {"turn": 0, "sent": 0, "since": None, "compacted": False}

    def report(chat: List[Dict[str, Any]], since: Optional[str]) -> Dict[str, Any]:
        return host.boundary(conversation, chat, turn=state["turn"], window=window, reserve=reserve, since=since, include_transcript=True)

    def filter(data: CallModelData[Any]) -> ModelInputData:
        state["turn"] += 1
        items = list(data.model_data.input)
        instructions = data.model_data.instructions
        whole = ([{"role": "system", "content": instructions}] if instructions else []) + to_chat(items)
        try:
            answer = report(whole, None) if state["since"] is None else report(to_chat(items[state["sent"] :]), state["since"])
        except cairn.Diverged:
            answer = report(whole, None)
        state["since"], state["sent"] = answer["acknowledged"], len(items)
        state["compacted"] = state["compacted"] or answer["action"]["kind"] in ("compacted", "handed-over")
        if not state["compacted"]:
            return data.model_data
        kept = answer["transcript"]
        # The instructions go separately, as they came.
        if instructions and kept and kept[0].get("role") == "system" and kept[0].get("content") == instructions:
            kept = kept[1:]
        return ModelInputData(input=from_chat(kept), instructions=instructions)  # type: ignore[arg-type]

    return filter


def session_history_tool(host: cairn.Host, conversation: str) -> FunctionTool:
    """Cairn's `session_history` for `conversation`, as a function tool."""

    @function_tool
    def session_history(action: str = "summary", query: Optional[str] = None, archive_id: Optional[str] = None, uri: Optional[str] = None) -> str:
        """Read what context compaction set aside from this conversation: action 'summary', 'search' with a query (exact words, ids, errors), 'page' with an archive_id, or 'artifact' with an artifact:// uri."""
        arguments = {k: v for k, v in dict(query=query, archive_id=archive_id, uri=uri).items() if v is not None}
        try:
            return json.dumps(host.history(conversation, action, **arguments))
        except cairn.CairnError as error:
            return json.dumps({"error": str(error), "code": error.code})

    return session_history
