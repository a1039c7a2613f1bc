// Cairn as the Vercel AI SDK's compaction: a `prepareStep` for generateText, streamText and
// ToolLoopAgent, and `session_history` as an AI SDK tool.
//
//   import { generateText, stepCountIs } from 'ai';
//   import { Host } from 'cairn-compaction';
//   import { prepareStep, sessionHistoryTool } from 'cairn-compaction/ai-sdk';
//
//   const host = new Host();
//   await generateText({
//     model, messages, stopWhen: stepCountIs(50),
//     tools: { ...tools, session_history: sessionHistoryTool(host, 'my-session') },
//     prepareStep: prepareStep(host, 'my-session', { window: 128_000 }),
//   });
//
// Before each step the messages are reported to Cairn as a turn boundary (only those appended
// since the last report: Cairn's record holds the rest). When the policy's trigger, cooldown and
// commit policy say so, Cairn's chain compacts them, and from then on every step is handed
// Cairn's working context (the compacted history and what came after), mapped back to the AI
// SDK's ModelMessages with every tool call still answered. The SDK carries a step's messages
// forward; a caller who sends its own full history again in a later call is recognised too.
//
// Text is what crosses: reasoning parts, images and files are not carried into a compacted
// context, and a tool's JSON output comes back as its text. Requires the `ai` package (7.x),
// which this package does not depend on.

import { jsonSchema, tool } from 'ai';

import { HISTORY_TOOL, readHistory, turnReporter } from './shared.mjs';

const textOf = (content) => {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return content == null ? '' : JSON.stringify(content);
  return content.filter((part) => part.type === 'text').map((part) => part.text).join('');
};

function outputText(output) {
  if (output == null) return '';
  switch (output.type) {
    case 'text':
    case 'error-text':
      return output.value;
    case 'content':
      return textOf(output.value);
    default:
      return JSON.stringify(output.value ?? output);
  }
}

/** AI SDK ModelMessages as OpenAI chat messages. */
export function toChat(messages) {
  const chat = [];
  for (const message of messages) {
    if (message.role === 'tool') {
      for (const part of message.content) {
        if (part.type === 'tool-result') chat.push({ role: 'tool', tool_call_id: part.toolCallId, content: outputText(part.output) });
      }
    } else if (message.role === 'assistant' && Array.isArray(message.content)) {
      const calls = message.content
        .filter((part) => part.type === 'tool-call')
        .map((part) => ({ id: part.toolCallId, type: 'function', function: { name: part.toolName, arguments: typeof part.input === 'string' ? part.input : JSON.stringify(part.input ?? {}) } }));
      const text = textOf(message.content);
      chat.push(calls.length ? { role: 'assistant', content: text || null, tool_calls: calls } : { role: 'assistant', content: text });
    } else {
      chat.push({ role: message.role, content: textOf(message.content) });
    }
  }
  return chat;
}

/** OpenAI chat messages as AI SDK ModelMessages (tool results join one tool message). */
export function fromChat(chat) {
  const names = new Map();
  const messages = [];
  for (const message of chat) {
    const content = textOf(message.content);
    if (message.role === 'tool') {
      const part = { type: 'tool-result', toolCallId: message.tool_call_id, toolName: names.get(message.tool_call_id) ?? 'unknown', output: { type: 'text', value: content } };
      const last = messages[messages.length - 1];
      if (last && last.role === 'tool') last.content.push(part);
      else messages.push({ role: 'tool', content: [part] });
    } else if (message.role === 'assistant' && message.tool_calls?.length) {
      const parts = content ? [{ type: 'text', text: content }] : [];
      for (const call of message.tool_calls) {
        names.set(call.id, call.function.name);
        let input;
        try {
          input = JSON.parse(call.function.arguments || '{}');
        } catch {
          input = call.function.arguments;
        }
        parts.push({ type: 'tool-call', toolCallId: call.id, toolName: call.function.name, input });
      }
      messages.push({ role: 'assistant', content: parts });
    } else {
      messages.push({ role: message.role === 'developer' ? 'system' : message.role, content });
    }
  }
  return messages;
}

/** How many of `messages` begin with `known` (JSON texts); -1 when they do not. */
function prefixOf(known, texts) {
  if (known.length > texts.length) return -1;
  for (let i = 0; i < known.length; i++) if (known[i] !== texts[i]) return -1;
  return known.length;
}

/**
 * A `prepareStep` that compacts through Cairn at the boundaries its policy chooses. Each step is
 * a turn (the policy's cooldown counts them). `window` is the model's context window in tokens;
 * `reserve` what the step needs beside the messages (its output, the tools' schemas).
 */
export function prepareStep(host, conversation, options) {
  const reporter = turnReporter(host, conversation, options, 'prepareStep');
  // What the SDK's messages began with at the last step: the caller's own history (`original`),
  // or, once Cairn compacted, the context this returned (`held`).
  const state = { original: [], held: null };

  return async ({ messages }) => {
    const texts = messages.map((message) => JSON.stringify(message));
    // What the SDK's messages begin with: the context this handed it (carried forward), the
    // caller's own history, or neither (reported whole).
    const carried = state.held ? prefixOf(state.held, texts) >= 0 : false;
    const from = carried ? state.held.length : prefixOf(state.original, texts);
    const { answer, compactedNow } = await reporter.turn(from >= 0 ? toChat(messages.slice(from)) : null, () => toChat(messages));
    state.original = from >= 0 ? state.original.concat(texts.slice(from)) : texts;
    if (!compactedNow && (!state.held || carried)) {
      // Nothing compacted yet, or the SDK already holds Cairn's context and what followed it.
      if (carried) state.held = texts;
      return undefined;
    }
    const context = fromChat(answer.transcript);
    state.held = context.map((message) => JSON.stringify(message));
    return { messages: context };
  };
}

/** Cairn's `session_history` as an AI SDK tool: the model reads what compaction set aside. */
export function sessionHistoryTool(host, conversation) {
  return tool({ description: HISTORY_TOOL.description, inputSchema: jsonSchema(HISTORY_TOOL.schema), execute: readHistory(host, conversation) });
}
