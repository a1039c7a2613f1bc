// `cairn-compaction/ai-sdk` in a real Vercel AI SDK run (`ai`, pinned in
// host/cli/tests/it/node_package.rs) driven by the SDK's own MockLanguageModelV4: a generateText
// tool loop long enough for Cairn to compact twice. Every model request after a compaction
// carries Cairn's checkpoint summary, the operator's rule, old outputs as artifact:// placeholders —
// every tool call is answered in every request, and the model's session_history call finds an
// id from a set-aside output.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';

import { Host } from 'cairn-compaction';
import { prepareStep, sessionHistoryTool, toChat, fromChat } from 'cairn-compaction/ai-sdk';

const RULE = 'Never edit the generated files under gen/.';
const PLANTED = 'BUILD-ID-ZEBRA-7431';
const ROUNDS = 40;
const usage = { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 5, text: 5, reasoning: 0 } };

/** Every tool call answered in a model request, and every result answering a call. */
function paired(prompt) {
  const parts = prompt.flatMap((message) => (Array.isArray(message.content) ? message.content : []));
  const calls = new Set(parts.filter((p) => p.type === 'tool-call').map((p) => p.toolCallId));
  const results = new Set(parts.filter((p) => p.type === 'tool-result').map((p) => p.toolCallId));
  return calls.size === results.size && [...calls].every((id) => results.has(id));
}

test('a long generateText loop is compacted by Cairn twice, and session_history finds what was set aside', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-ai-sdk-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // Both stages run: old outputs elided, and the history before them summarized (a checkpoint).
  const host = new Host({ home: join(dir, 'home'), policy: fileURLToPath(new URL('./offline-deep.toml', import.meta.url)) });

  const prompts = [];
  const model = new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
      prompts.push(prompt);
      const step = prompts.length - 1;
      const call = (toolName, input) => ({ content: [{ type: 'text', text: `Step ${step}.` }, { type: 'tool-call', toolCallId: `call_${step}`, toolName, input: JSON.stringify(input) }], finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] });
      if (step < ROUNDS) return call('run', { cmd: `make step${step}` });
      if (step === ROUNDS) return call('session_history', { action: 'search', query: PLANTED });
      return { content: [{ type: 'text', text: 'The build passes.' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] };
    },
  });
  const run = tool({
    description: 'Run a shell command in the project.',
    inputSchema: jsonSchema({ type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] }),
    execute: async ({ cmd }) => Array.from({ length: 120 }, (_, n) => `${cmd}: line ${n}: compiling module_${n} ok`).join('\n') + (cmd === 'make step0' ? `\nbuild id ${PLANTED}` : ''),
  });

  const result = await generateText({
    model,
    system: 'You are a coding agent.',
    messages: [{ role: 'user', content: `Fix the build. ${RULE}` }],
    tools: { run, session_history: sessionHistoryTool(host, 'ai') },
    stopWhen: stepCountIs(ROUNDS + 5),
    prepareStep: prepareStep(host, 'ai', { window: 24_000, reserve: 2_000 }),
  });
  assert.equal(result.text, 'The build passes.');
  assert.equal(prompts.length, ROUNDS + 2);

  const { timeline } = await host.show('ai');
  const committed = timeline.moments.filter((m) => m.kind === 'compaction' && m.status === 'committed');
  assert.ok(committed.length >= 2, JSON.stringify(timeline.moments));
  console.log(`${committed.length} compactions; the request before the recall holds ${JSON.stringify(prompts[ROUNDS]).length} characters`);

  // The request before the recall: Cairn's context, not the SDK's whole history.
  const before = JSON.stringify(prompts[ROUNDS]);
  assert.ok(before.includes('Checkpoint (Cairn: earlier history, compacted)'), 'Cairn\'s summary is in the request');
  assert.ok(before.includes(RULE), 'the operator\'s rule is in the request after compaction');
  assert.ok(before.includes('artifact://'), 'old outputs are placeholders naming where the whole is');
  assert.ok(!before.includes(PLANTED), 'the early output was set aside');
  assert.ok(before.includes('make step39: line 119'), 'the latest output is whole');
  assert.equal(prompts[ROUNDS][0].role, 'system', 'the system prompt goes first, as it came');
  for (const [n, prompt] of prompts.entries()) assert.ok(paired(prompt), `request ${n}: every tool call keeps its result`);

  // The model asked session_history for the id; the answer reached it in the last request.
  const recalled = prompts[ROUNDS + 1].flatMap((m) => (Array.isArray(m.content) ? m.content : [])).find((p) => p.type === 'tool-result' && p.toolCallId === `call_${ROUNDS}`);
  assert.ok(JSON.stringify(recalled).includes(PLANTED), `session_history found the id: ${JSON.stringify(recalled)}`);

  // Undo of the first compaction takes back every one after it: what was set aside is back.
  const restored = await host.undo('ai', { archiveId: committed[0].archive_id });
  assert.equal(restored.undone.length, committed.length);
  assert.ok(String(restored.transcript).includes(PLANTED), 'undo restores the context before the first compaction');
});

test('messages map to chat and back with calls, results and their names', () => {
  const messages = [
    { role: 'system', content: 'sys' },
    { role: 'user', content: [{ type: 'text', text: 'hi' }] },
    { role: 'assistant', content: [{ type: 'text', text: 'running' }, { type: 'tool-call', toolCallId: 'a', toolName: 'run', input: { cmd: 'ls' } }, { type: 'tool-call', toolCallId: 'b', toolName: 'read', input: { path: 'x' } }] },
    { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'a', toolName: 'run', output: { type: 'text', value: 'out' } }, { type: 'tool-result', toolCallId: 'b', toolName: 'read', output: { type: 'json', value: { n: 1 } } }] },
    { role: 'assistant', content: 'done' },
  ];
  const chat = toChat(messages);
  assert.deepEqual(chat.map((m) => m.role), ['system', 'user', 'assistant', 'tool', 'tool', 'assistant']);
  const back = fromChat(chat);
  assert.deepEqual(back[2], messages[2]);
  assert.deepEqual(back[3].content.map((p) => [p.toolCallId, p.toolName, p.output.value]), [['a', 'run', 'out'], ['b', 'read', '{"n":1}']]);
  assert.deepEqual(back[4], { role: 'assistant', content: 'done' });
});
