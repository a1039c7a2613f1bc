"""Cairn as Pydantic AI's compaction: a history processor for `pydantic_ai.Agent` (its
`ProcessHistory` capability).

Before each model request the processor reports a turn boundary to Cairn with the run's
messages (mapped to OpenAI chat messages). When the policy's trigger, cooldown and commit
policy say so, Cairn's chain compacts them and the request goes out with the compacted history,
mapped back to Pydantic AI's messages with every tool call still answered::

    from pydantic_ai import Agent
    from pydantic_ai.capabilities import ProcessHistory
    import cairn
    from cairn.integrations.pydantic_ai import history_processor, session_history

    host = cairn.Host()
    agent = Agent(model, capabilities=[ProcessHistory(history_processor(host, "my-session", window=128_000))])
    agent.tool_plain(session_history(host, "my-session"))

Requires `pydantic-ai` (or `pydantic-ai-slim`), not a dependency of the `cairn` package.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

import cairn

__all__ = ["history_processor", "session_history", "to_chat", "from_chat"]


def to_chat(messages: List[ModelMessage]) -> List[Dict[str, Any]]:
    """Pydantic AI's messages as OpenAI chat messages (thinking is not carried)."""
    chat: List[Dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    chat.append({"role": "system", "content": part.content})
                elif isinstance(part, UserPromptPart):
                    content = part.content if isinstance(part.content, str) else json.dumps([str(c) for c in part.content])
                    chat.append({"role": "user", "content": content})
                elif isinstance(part, ToolReturnPart):
                    chat.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response_str()})
                elif isinstance(part, RetryPromptPart) and part.tool_name is not None:
                    chat.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response()})
                elif isinstance(part, RetryPromptPart):
                    chat.append({"role": "user", "content": part.model_response()})
        else:
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            calls = [
                {"id": p.tool_call_id, "type": "function", "function": {"name": p.tool_name, "arguments": p.args_as_json_str()}}
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            entry: Dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = calls
            chat.append(entry)
    return chat


def from_chat(chat: List[Dict[str, Any]]) -> List[ModelMessage]:
    """OpenAI chat messages as Pydantic AI's: consecutive system, user and tool messages make
    one request, each assistant message a response."""
    messages: List[ModelMessage] = []
    pending: List[ModelRequestPart] = []
    tool_names: Dict[str, str] = {}
    for entry in chat:
        role = entry.get("role")
        content = entry.get("content")
        text = content if isinstance(content, str) else "" if content is None else json.dumps(content)
        if role == "assistant":
            if pending:
                messages.append(ModelRequest(parts=pending))
                pending = []
            parts: List[ModelResponsePart] = [TextPart(content=text)] if text else []
            for call in entry.get("tool_calls") or []:
                function = call["function"]
                tool_names[call["id"]] = function["name"]
                parts.append(ToolCallPart(tool_name=function["name"], args=function["arguments"], tool_call_id=call["id"]))
            messages.append(ModelResponse(parts=parts))
        elif role == "tool":
            call_id = entry["tool_call_id"]
            pending.append(ToolReturnPart(tool_name=tool_names.get(call_id, "tool"), content=text, tool_call_id=call_id))
        elif role == "system":
            pending.append(SystemPromptPart(content=text))
        else:
            pending.append(UserPromptPart(content=text))
    if pending:
        messages.append(ModelRequest(parts=pending))
    return messages


def history_processor(host: cairn.Host, conversation: str, *, window: int, reserve: int = 4096) -> Callable[[List[ModelMessage]], List[ModelMessage]]:
    """A history processor that compacts through Cairn at the boundaries its policy chooses.
    Each model request is a turn (the policy's cooldown counts them)."""

    def process(messages: List[ModelMessage]) -> List[ModelMessage]:
        turn = 1 + sum(1 for m in messages if isinstance(m, ModelResponse))
        answer = host.boundary(conversation, to_chat(messages), turn=turn, window=window, reserve=reserve)
        if answer["action"]["kind"] not in ("compacted", "handed-over"):
            return messages
        return from_chat(answer["transcript"])

    return process


def session_history(host: cairn.Host, conversation: str) -> Callable[..., str]:
    """Cairn's `session_history` for `conversation`, as a plain tool (`agent.tool_plain`)."""

    def session_history(action: str = "summary", query: Optional[str] = None, archive_id: Optional[str] = None, uri: Optional[str] = None) -> str:
        """Read what context compaction set aside from this conversation: action 'summary', 'search' with a query (exact words, ids, errors), 'page' with an archive_id, or 'artifact' with an artifact:// uri."""
        arguments = {k: v for k, v in dict(query=query, archive_id=archive_id, uri=uri).items() if v is not None}
        try:
            return json.dumps(host.history(conversation, action, **arguments))
        except cairn.CairnError as error:
            return json.dumps({"error": str(error), "code": error.code})

    return session_history
