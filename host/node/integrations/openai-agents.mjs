// Cairn as the OpenAI Agents SDK's (JavaScript) compaction: a `callModelInputFilter` for a run,
// and `session_history` as a function tool.
//
//   import { Agent, run } from '@openai/agents';
//   import { Host } from 'cairn-compaction';
//   import { inputFilter, sessionHistoryTool } from 'cairn-compaction/openai-agents';
//
//   const host = new Host();
//   const agent = new Agent({ name: 'coder', tools: [...tools, sessionHistoryTool(host, 'my-session')] });
//   await run(agent, task, { callModelInputFilter: inputFilter(host, 'my-session', { window: 128_000 }) });
//
// The SDK hands every model call the run's whole history, and a filter's answer lasts one call.
// So each call reports only the items appended since the last (`since`: Cairn's record holds the
// rest), and once Cairn has compacted, every call gets Cairn's working context — the compacted
// history and what came after — mapped back to the SDK's items with every function call
// answered. The instructions go separately, as they came. Text is what crosses: reasoning items
// and hosted tools' items are not carried into a compacted input. Requires `@openai/agents`,
// which this package does not depend on.

import { tool } from '@openai/agents';

import { HISTORY_TOOL, readHistory, turnReporter } from './shared.mjs';

const textOf = (content) => {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part === 'string' ? part : part.text ?? part.refusal ?? '')).join('');
  if (content && typeof content === 'object' && 'text' in content) return content.text;
  return content == null ? '' : JSON.stringify(content);
};

/** The SDK's input items as OpenAI chat messages: consecutive function calls join the assistant
 * message before them. */
export function toChat(items) {
  const chat = [];
  for (const item of items) {
    const kind = item.type ?? 'message';
    if (kind === 'function_call') {
      const call = { id: item.callId, type: 'function', function: { name: item.name, arguments: item.arguments ?? '{}' } };
      const last = chat[chat.length - 1];
      if (last && last.role === 'assistant') (last.tool_calls ??= []).push(call);
      else chat.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (kind === 'function_call_result') {
      chat.push({ role: 'tool', tool_call_id: item.callId, content: textOf(item.output) });
    } else if (kind === 'message' && item.role) {
      chat.push({ role: item.role === 'developer' ? 'system' : item.role, content: textOf(item.content) });
    }
  }
  return chat;
}

/** OpenAI chat messages as the SDK's input items. */
export function fromChat(chat) {
  const names = new Map();
  const items = [];
  for (const message of chat) {
    const content = textOf(message.content);
    if (message.role === 'tool') {
      items.push({ type: 'function_call_result', callId: message.tool_call_id, name: names.get(message.tool_call_id) ?? 'unknown', status: 'completed', output: { type: 'text', text: content } });
      continue;
    }
    if (message.role === 'assistant') {
      if (content) items.push({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: content }] });
    } else {
      items.push({ type: 'message', role: message.role, content });
    }
    for (const call of message.tool_calls ?? []) {
      names.set(call.id, call.function.name);
      items.push({ type: 'function_call', callId: call.id, name: call.function.name, arguments: call.function.arguments, status: 'completed' });
    }
  }
  return items;
}

/**
 * A `callModelInputFilter` that compacts through Cairn at the boundaries its policy chooses. Each
 * model call is a turn (the policy's cooldown counts them). `window` is the model's context
 * window in tokens; `reserve` what a call needs beside the input (its output, the tools' schemas).
 */
export function inputFilter(host, conversation, options) {
  const reporter = turnReporter(host, conversation, options, 'inputFilter');
  let sent = 0;

  return async ({ modelData }) => {
    const items = [...modelData.input];
    const { instructions } = modelData;
    const whole = () => (instructions ? [{ role: 'system', content: instructions }] : []).concat(toChat(items));
    const { answer } = await reporter.turn(items.length >= sent ? toChat(items.slice(sent)) : null, whole);
    sent = items.length;
    if (!reporter.compacted) return modelData;
    let kept = answer.transcript;
    // The instructions go separately, as they came.
    if (instructions && kept[0]?.role === 'system' && kept[0].content === instructions) kept = kept.slice(1);
    return { input: fromChat(kept), instructions };
  };
}

/** Cairn's `session_history` as a function tool: the model reads what compaction set aside. */
export function sessionHistoryTool(host, conversation) {
  const { name, description, schema } = HISTORY_TOOL;
  return tool({ name, description, parameters: schema, strict: false, execute: readHistory(host, conversation) });
}
