// Cairn as LangGraph.js's compaction: a `preModelHook` for `createReactAgent` (or a node of your
// own graph placed before the model), and `session_history` as a LangChain tool.
//
//   import { createReactAgent } from '@langchain/langgraph/prebuilt';
//   import { Host } from 'cairn-compaction';
//   import { preModelHook, sessionHistoryTool } from 'cairn-compaction/langgraph';
//
//   const host = new Host();
//   const agent = createReactAgent({
//     llm, tools: [...tools, sessionHistoryTool(host, 'my-session')],
//     preModelHook: preModelHook(host, 'my-session', { window: 128_000 }),
//   });
//
// The graph's state keeps the whole history; before each model call the hook reports what was
// appended since the last call (`since`: Cairn's record holds the rest) as a turn boundary, and
// once the policy has compacted, the model's input (`llmInputMessages`) is Cairn's working
// context — the compacted history and what came after — in LangChain's message types, every
// tool call answered. The state itself is left whole. Text is what crosses: images and other
// content blocks are not carried into a compacted input. Requires `@langchain/core` (and
// `@langchain/langgraph` for createReactAgent), which this package does not depend on.

import { AIMessage, HumanMessage, SystemMessage, ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';

import { HISTORY_TOOL, readHistory, turnReporter } from './shared.mjs';

const textOf = (content) => {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part === 'string' ? part : part.type === 'text' ? part.text : '')).join('');
  return content == null ? '' : JSON.stringify(content);
};

const kindOf = (message) => (typeof message.getType === 'function' ? message.getType() : message._getType());

/** LangChain messages as OpenAI chat messages. */
export function toChat(messages) {
  return messages.map((message) => {
    const content = textOf(message.content);
    switch (kindOf(message)) {
      case 'ai': {
        const calls = (message.tool_calls ?? []).map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.args ?? {}) } }));
        return calls.length ? { role: 'assistant', content: content || null, tool_calls: calls } : { role: 'assistant', content };
      }
      case 'tool':
        return { role: 'tool', tool_call_id: message.tool_call_id, content };
      case 'system':
        return { role: 'system', content };
      default:
        return { role: 'user', content };
    }
  });
}

/** OpenAI chat messages as LangChain messages. */
export function fromChat(chat) {
  const names = new Map();
  return chat.map((message) => {
    const content = textOf(message.content);
    switch (message.role) {
      case 'assistant': {
        const toolCalls = (message.tool_calls ?? []).map((call) => {
          names.set(call.id, call.function.name);
          let args;
          try {
            args = JSON.parse(call.function.arguments || '{}');
          } catch {
            args = { input: call.function.arguments };
          }
          return { id: call.id, name: call.function.name, args, type: 'tool_call' };
        });
        return new AIMessage({ content, tool_calls: toolCalls });
      }
      case 'tool':
        return new ToolMessage({ content, tool_call_id: message.tool_call_id, name: names.get(message.tool_call_id) });
      case 'system':
      case 'developer':
        return new SystemMessage(content);
      default:
        return new HumanMessage(content);
    }
  });
}

/**
 * A `preModelHook` that compacts through Cairn at the boundaries its policy chooses. Each model
 * call is a turn (the policy's cooldown counts them). `window` is the model's context window in
 * tokens; `reserve` what a call needs beside the messages (its output, the tools' schemas).
 */
export function preModelHook(host, conversation, options) {
  const reporter = turnReporter(host, conversation, options, 'preModelHook');
  let sent = 0;

  return async ({ messages }) => {
    const { answer } = await reporter.turn(messages.length >= sent ? toChat(messages.slice(sent)) : null, () => toChat(messages));
    sent = messages.length;
    return { llmInputMessages: reporter.compacted ? fromChat(answer.transcript) : messages };
  };
}

/** Cairn's `session_history` as a LangChain tool: the model reads what compaction set aside. */
export function sessionHistoryTool(host, conversation) {
  // LangChain's tool has always accepted extra keys (no additionalProperties: false).
  const { additionalProperties: _closed, ...schema } = HISTORY_TOOL.schema;
  return tool(readHistory(host, conversation), { name: HISTORY_TOOL.name, description: HISTORY_TOOL.description, schema });
}
