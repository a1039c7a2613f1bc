"""Cairn as LangChain's compaction: a middleware for `langchain.agents.create_agent`.

Before each model call `CairnMiddleware` reports a turn boundary to Cairn with the state's
messages (as OpenAI chat messages). When the policy's trigger, cooldown and commit policy say
so, Cairn's chain compacts them — in its sandbox, recorded in its home — and the state's
messages are replaced by the compacted context in LangChain's own message types, every tool
call still answered. The middleware also gives the model Cairn's `session_history` tool, so it
can read back whatever was set aside::

    from langchain.agents import create_agent
    import cairn
    from cairn.integrations.langchain import CairnMiddleware

    host = cairn.Host()
    agent = create_agent(model, tools, middleware=[CairnMiddleware(host, "my-session", window=128_000)])

Requires `langchain` 1.x (not a dependency of the `cairn` package).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, convert_to_messages, convert_to_openai_messages
from langchain_core.tools import StructuredTool
from langgraph.graph.message import REMOVE_ALL_MESSAGES

import cairn

__all__ = ["CairnMiddleware", "session_history_tool"]


def session_history_tool(host: cairn.Host, conversation: str) -> StructuredTool:
    """Cairn's `session_history` for `conversation`, as a LangChain tool."""

    def session_history(action: str = "summary", query: Optional[str] = None, archive_id: Optional[str] = None, uri: Optional[str] = None, offset: Optional[int] = None, limit: Optional[int] = None) -> str:
        arguments = {k: v for k, v in dict(query=query, archive_id=archive_id, uri=uri, offset=offset, limit=limit).items() if v is not None}
        try:
            return json.dumps(host.history(conversation, action, **arguments))
        except cairn.CairnError as error:
            # The model reads a failed call's message and may correct it.
            return json.dumps({"error": str(error), "code": error.code})

    return StructuredTool.from_function(
        session_history,
        name="session_history",
        description=(
            "Read what context compaction set aside from this conversation: action 'summary' (what was compacted), "
            "'search' with a query (exact words, ids, errors), 'page' with an archive_id, or 'artifact' with an artifact:// uri."
        ),
    )


class CairnMiddleware(AgentMiddleware):
    """Compacts the agent's messages through Cairn at the boundaries its policy chooses.

    ``window`` is the model's context window in tokens and ``reserve`` what its answer needs;
    ``conversation`` keys the record (one per agent thread). Each model call is a turn: the
    policy's cooldown counts them.
    """

    def __init__(self, host: cairn.Host, conversation: str, *, window: int, reserve: int = 4096) -> None:
        super().__init__()
        self.host = host
        self.conversation = conversation
        self.window = window
        self.reserve = reserve
        self.tools = [session_history_tool(host, conversation)]
        self.last: Optional[Dict[str, Any]] = None
        """The last boundary's answer (its action, report, notices)."""

    def _boundary(self, messages: List[BaseMessage]) -> Optional[Dict[str, Any]]:
        turn = 1 + sum(1 for m in messages if isinstance(m, AIMessage))
        chat = convert_to_openai_messages(messages)
        answer = self.host.boundary(self.conversation, chat, turn=turn, window=self.window, reserve=self.reserve)
        self.last = answer
        if answer["action"]["kind"] not in ("compacted", "handed-over"):
            return None
        kept = convert_to_messages(answer["transcript"])
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *kept]}

    def before_model(self, state: Any, runtime: Any) -> Optional[Dict[str, Any]]:
        return self._boundary(state["messages"])

    async def abefore_model(self, state: Any, runtime: Any) -> Optional[Dict[str, Any]]:
        import asyncio

        return await asyncio.to_thread(self._boundary, state["messages"])
