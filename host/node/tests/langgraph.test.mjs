// `cairn-compaction/langgraph` in a real LangGraph.js agent (`@langchain/langgraph`'s
// createReactAgent, pinned in host/cli/tests/it/node_package.rs) with a scripted chat model: a
// run long enough for Cairn to compact twice. The model's input after a compaction carries
// Cairn's checkpoint summary, the operator's rule, old outputs as artifact:// placeholders — every
// tool call is answered in every input, the graph's state keeps the whole history, and the
// session_history tool finds an id from a set-aside output.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { createReactAgent } from '@langchain/langgraph/prebuilt';

import { Host } from 'cairn-compaction';
import { preModelHook, sessionHistoryTool } from 'cairn-compaction/langgraph';

const RULE = 'Never edit the generated files under gen/.';
const PLANTED = 'BUILD-ID-ZEBRA-7431';
const ROUNDS = 40;

/** A chat model that answers from a script, one reply per call, and records each call's input. */
class ScriptedChatModel extends BaseChatModel {
  constructor(replies) {
    super({});
    this.replies = replies;
    this.inputs = [];
  }
  _llmType() {
    return 'scripted';
  }
  bindTools() {
    return this;
  }
  async _generate(messages) {
    this.inputs.push(messages);
    const reply = this.replies[this.inputs.length - 1];
    if (!reply) throw new Error(`no scripted reply for call ${this.inputs.length}`);
    return { generations: [{ text: String(reply.content), message: reply }] };
  }
}

function paired(messages) {
  const kind = (m) => m.getType();
  const asked = new Set(messages.filter((m) => kind(m) === 'ai').flatMap((m) => (m.tool_calls ?? []).map((c) => c.id)));
  const answered = new Set(messages.filter((m) => kind(m) === 'tool').map((m) => m.tool_call_id));
  return asked.size === answered.size && [...asked].every((id) => answered.has(id));
}

test('a long LangGraph run is compacted by Cairn twice, and session_history finds what was set aside', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-langgraph-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // Both stages run: old outputs elided, and the history before them summarized (a checkpoint).
  const host = new Host({ home: join(dir, 'home'), policy: fileURLToPath(new URL('./offline-deep.toml', import.meta.url)) });

  const run = tool(async ({ cmd }) => Array.from({ length: 120 }, (_, n) => `${cmd}: line ${n}: compiling module_${n} ok`).join('\n') + (cmd === 'make step0' ? `\nbuild id ${PLANTED}` : ''), {
    name: 'run',
    description: 'Run a shell command in the project.',
    schema: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
  });
  const replies = Array.from({ length: ROUNDS }, (_, i) => new AIMessage({ content: `Round ${i}.`, tool_calls: [{ id: `call_${i}`, name: 'run', args: { cmd: `make step${i}` }, type: 'tool_call' }] }));
  replies.push(new AIMessage({ content: '', tool_calls: [{ id: 'call_recall', name: 'session_history', args: { action: 'search', query: PLANTED }, type: 'tool_call' }] }));
  replies.push(new AIMessage('The build passes.'));
  const llm = new ScriptedChatModel(replies);

  const agent = createReactAgent({
    llm,
    tools: [run, sessionHistoryTool(host, 'lg')],
    prompt: 'You are a coding agent.',
    preModelHook: preModelHook(host, 'lg', { window: 24_000, reserve: 2_000 }),
  });
  const result = await agent.invoke({ messages: [{ role: 'user', content: `Fix the build. ${RULE}` }] }, { recursionLimit: 4 * ROUNDS + 20 });
  assert.equal(result.messages.at(-1).content, 'The build passes.');
  assert.ok(JSON.stringify(result.messages).includes(PLANTED), 'the graph\'s state keeps the whole history');

  const { timeline } = await host.show('lg');
  const committed = timeline.moments.filter((m) => m.kind === 'compaction' && m.status === 'committed');
  assert.ok(committed.length >= 2, JSON.stringify(timeline.moments));
  assert.equal(llm.inputs.length, ROUNDS + 2);
  console.log(`${committed.length} compactions; the input before the recall holds ${JSON.stringify(llm.inputs[ROUNDS]).length} characters`);

  const before = JSON.stringify(llm.inputs[ROUNDS].map((m) => m.content));
  assert.ok(before.includes('Checkpoint (Cairn: earlier history, compacted)'), 'Cairn\'s summary is in the request');
  assert.ok(before.includes(RULE), 'the operator\'s rule is in the input after compaction');
  assert.ok(before.includes('artifact://'), 'old outputs are placeholders naming where the whole is');
  assert.ok(!before.includes(PLANTED), 'the early output was set aside');
  assert.ok(before.includes('make step39: line 119'), 'the latest output is whole');
  for (const [n, input] of llm.inputs.entries()) assert.ok(paired(input), `call ${n}: every tool call keeps its result`);

  const recalled = llm.inputs[ROUNDS + 1].find((m) => m.getType() === 'tool' && m.tool_call_id === 'call_recall');
  assert.ok(String(recalled?.content).includes(PLANTED), `session_history found the id: ${recalled?.content}`);

  // Undo of the first compaction takes back every one after it: what was set aside is back.
  const restored = await host.undo('lg', { archiveId: committed[0].archive_id });
  assert.equal(restored.undone.length, committed.length);
  assert.ok(String(restored.transcript).includes(PLANTED), 'undo restores the context before the first compaction');
});
