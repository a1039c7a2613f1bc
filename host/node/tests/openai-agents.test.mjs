// `cairn-compaction/openai-agents` in a real OpenAI Agents SDK (JavaScript) run
// (`@openai/agents`, pinned in host/cli/tests/it/node_package.rs) driven by the SDK's own
// ScriptedModel: a run long enough for Cairn to compact twice. The model's next input carries
// Cairn's checkpoint summary, the operator's rule, old outputs as artifact:// placeholders,
// every function call answered — and the session_history tool finds an id from a set-aside
// output.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Agent, run, setTracingDisabled, tool } from '@openai/agents';
import { ScriptedModel, assistantMessage, functionCall } from '@openai/agents-core/testing';

import { Host } from 'cairn-compaction';
import { inputFilter, sessionHistoryTool } from 'cairn-compaction/openai-agents';

const RULE = 'Never edit the generated files under gen/.';
const PLANTED = 'BUILD-ID-ZEBRA-7431';
const ROUNDS = 40;

// Nothing leaves this machine: no trace export.
setTracingDisabled(true);

function paired(items) {
  const asked = new Set(items.filter((i) => i.type === 'function_call').map((i) => i.callId));
  const answered = new Set(items.filter((i) => i.type === 'function_call_result').map((i) => i.callId));
  return asked.size === answered.size && [...asked].every((id) => answered.has(id));
}

test('a long run is compacted by Cairn twice, and session_history finds what was set aside', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-oai-js-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // Both stages run: old outputs elided, and the history before them summarized (a checkpoint).
  const host = new Host({ home: join(dir, 'home'), policy: fileURLToPath(new URL('./offline-deep.toml', import.meta.url)) });

  const runTool = tool({
    name: 'run',
    description: 'Run a shell command in the project.',
    parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'], additionalProperties: false },
    strict: true,
    execute: async ({ cmd }) => Array.from({ length: 120 }, (_, n) => `${cmd}: line ${n}: compiling module_${n} ok`).join('\n') + (cmd === 'make step0' ? `\nbuild id ${PLANTED}` : ''),
  });
  const steps = Array.from({ length: ROUNDS }, (_, i) => [assistantMessage(`Round ${i}.`, { id: `msg_${i}` }), functionCall('run', { cmd: `make step${i}` }, { callId: `call_${i}` })]);
  steps.push([functionCall('session_history', { action: 'search', query: PLANTED }, { callId: 'call_recall' })]);
  steps.push([assistantMessage('The build passes.', { id: 'msg_end' })]);
  const model = new ScriptedModel(steps);
  const agent = new Agent({ name: 'coder', instructions: 'You are a coding agent.', model, tools: [runTool, sessionHistoryTool(host, 'oai')] });

  const result = await run(agent, `Fix the build. ${RULE}`, { callModelInputFilter: inputFilter(host, 'oai', { window: 24_000, reserve: 2_000 }), maxTurns: ROUNDS + 5 });
  assert.equal(result.finalOutput, 'The build passes.');

  const { timeline } = await host.show('oai');
  const committed = timeline.moments.filter((m) => m.kind === 'compaction' && m.status === 'committed');
  assert.ok(committed.length >= 2, JSON.stringify(timeline.moments));
  const calls = model.calls;
  assert.equal(calls.length, ROUNDS + 2);
  console.log(`${committed.length} compactions; the input before the recall holds ${JSON.stringify(calls[ROUNDS].request.input).length} characters`);

  const before = JSON.stringify(calls[ROUNDS].request.input);
  assert.ok(before.includes('Checkpoint (Cairn: earlier history, compacted)'), 'Cairn\'s summary is in the request');
  assert.ok(before.includes(RULE), 'the operator\'s rule is in the input after compaction');
  assert.ok(before.includes('artifact://'), 'old outputs are placeholders naming where the whole is');
  assert.ok(!before.includes(PLANTED), 'the early output was set aside');
  assert.ok(before.includes('make step39: line 119'), 'the latest output is whole');
  assert.equal(calls[ROUNDS].request.systemInstructions, 'You are a coding agent.', 'the instructions go separately, as they came');
  for (const call of calls) assert.ok(paired(Array.isArray(call.request.input) ? call.request.input : []), `call ${call.index}: every function call keeps its output`);

  const recalled = calls[ROUNDS + 1].request.input.find((i) => i.type === 'function_call_result' && i.callId === 'call_recall');
  assert.ok(JSON.stringify(recalled).includes(PLANTED), `session_history found the id: ${JSON.stringify(recalled)}`);

  // Undo of the first compaction takes back every one after it: what was set aside is back.
  const restored = await host.undo('oai', { archiveId: committed[0].archive_id });
  assert.equal(restored.undone.length, committed.length);
  assert.ok(String(restored.transcript).includes(PLANTED), 'undo restores the context before the first compaction');
});
