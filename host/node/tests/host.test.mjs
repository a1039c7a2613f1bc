// The installed `cairn-compaction` package as a Node.js harness uses it: OpenAI chat messages in
// and out, recall of what was set aside, errors by class, calls off the event loop, and the
// `cairn` bin from the same package. Run in a fresh project where the packed packages are
// installed (no path tricks): see host/cli/tests/it/node_package.rs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

import cairn from 'cairn-compaction';

const RULE = 'Never edit the generated files under gen/.';
const PLANTED = 'BUILD-ID-ZEBRA-7431';

/** A coding session in OpenAI chat messages: the operator's rule first, tool calls with long
 * outputs, a planted id early in one output, the latest request last. */
export function session(turns = 30) {
  const messages = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: `Fix the flaky parser test. ${RULE}` },
  ];
  for (let i = 0; i < turns; i++) {
    let log = Array.from({ length: 80 }, (_, n) => `step ${i} line ${n}: compiling module_${n} ok`).join('\n');
    if (i === 1) log += `\nbuild id ${PLANTED}`;
    messages.push({ role: 'assistant', content: null, tool_calls: [{ id: `call_${i}`, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command: `cargo test round_${i}` }) } }] });
    messages.push({ role: 'tool', tool_call_id: `call_${i}`, content: log });
    messages.push({ role: 'assistant', content: `Round ${i} done.` });
  }
  messages.push({ role: 'user', content: 'Now make parse_header accept tabs.' });
  return messages;
}

/** Every tool call answered, and every tool result answering a call. */
function paired(messages) {
  const calls = new Set(messages.filter((m) => m.role === 'assistant').flatMap((m) => (m.tool_calls || []).map((c) => c.id)));
  const results = new Set(messages.filter((m) => m.role === 'tool').map((m) => m.tool_call_id));
  return calls.size === results.size && [...calls].every((id) => results.has(id));
}

function scratch(t) {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-node-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('compact answers in the caller\'s shape and history recalls what was set aside', async (t) => {
  const host = new cairn.Host({ home: join(scratch(t), 'home') });
  const sent = session();
  const answer = await host.compact('app', sent);
  assert.ok(answer.committed, JSON.stringify(answer.not_committed));
  assert.ok(answer.tokens_after < answer.tokens_before);
  assert.equal(answer.format, 'openai');
  const kept = answer.transcript;
  assert.ok(Array.isArray(kept), 'an array of messages back for an array sent');
  const text = JSON.stringify(kept);
  assert.ok(text.includes(RULE), 'the operator\'s rule survives');
  assert.ok(text.includes('Now make parse_header accept tabs.'), 'the latest request stays');
  assert.ok(paired(kept), 'every tool call keeps its result');
  assert.ok(!text.includes(PLANTED), 'the early output was set aside');
  const found = await host.history('app', 'search', { query: PLANTED });
  assert.ok(JSON.stringify(found).includes(PLANTED), 'session_history finds what was set aside');
  const { timeline } = await host.show('app');
  assert.equal(timeline.moments[0].archive_id, answer.archive_id);
  const restored = await host.undo('app', { messages: kept });
  assert.deepEqual(restored.undone, [answer.archive_id]);
  assert.equal(restored.transcript.length, sent.length);
});

test('text in, text out', async (t) => {
  const host = new cairn.Host({ home: join(scratch(t), 'home') });
  const answer = await host.compact('text', JSON.stringify(session()));
  assert.equal(typeof answer.transcript, 'string');
  assert.ok(paired(JSON.parse(answer.transcript)));
});

test('errors are classes by code', async (t) => {
  const host = new cairn.Host({ home: join(scratch(t), 'home') });
  await assert.rejects(host.undo('nobody'), (e) => e instanceof cairn.NotFound && e.code === 'not-found' && e instanceof cairn.CairnError);
  await assert.rejects(host.call('compact', { conversation: 'app' }), cairn.InvalidRequest);
  await assert.rejects(host.call('compress', {}), cairn.InvalidRequest);
  await assert.rejects(host.compact('app', 'this is no transcript'), cairn.TranscriptInvalid);
  const first = await host.boundary('inc', session(4), { turn: 1, window: 1_000_000 });
  assert.ok(first.acknowledged);
  await assert.rejects(host.boundary('inc', [{ role: 'user', content: 'next' }], { turn: 2, window: 1_000_000, since: 'm-not-an-entry-of-this' }), cairn.Diverged);
  assert.deepEqual([...cairn.ERROR_CODES].sort(), ['diverged', 'forbidden', 'internal', 'invalid-request', 'not-found', 'refused', 'transcript-invalid', 'unavailable']);
  assert.ok(cairn.OPERATIONS.includes('boundary'));
});

test('a broken policy is PolicyInvalid naming its file', (t) => {
  const dir = scratch(t);
  const policy = join(dir, 'broken.toml');
  writeFileSync(policy, '[lifecycle]\ncooldown_turns = "soon"\n');
  assert.throws(() => new cairn.Host({ home: join(dir, 'home'), policy }), (e) => e instanceof cairn.PolicyInvalid && e.message.includes('broken.toml'));
});

test('one host serves concurrent calls while the event loop keeps running', async (t) => {
  const host = new cairn.Host({ home: join(scratch(t), 'home') });
  let ticks = 0;
  const timer = setInterval(() => ticks++, 1);
  const started = Date.now();
  const answers = await Promise.all([0, 1, 2, 3].map((n) => host.compact(`concurrent-${n}`, session(40))));
  const elapsed = Date.now() - started;
  clearInterval(timer);
  for (const answer of answers) assert.ok(answer.committed);
  // Each compaction runs on a worker thread: the timer fired throughout (at least once per
  // 20 ms of the calls' time), where a call on the event loop would have starved it.
  assert.ok(ticks >= Math.floor(elapsed / 20), `${ticks} ticks in ${elapsed} ms`);
  assert.equal((await host.show('concurrent-3')).timeline.moments.length, 1);
});

const require = createRequire(import.meta.url);
const bin = join(require.resolve('cairn-compaction/package.json'), '..', 'bin', 'cairn.js');

test('the cairn command runs from the package', (t) => {
  const dir = scratch(t);
  const version = spawnSync('npx', ['--no-install', 'cairn', '--version'], { encoding: 'utf8' });
  assert.equal(version.status, 0, version.stderr);
  assert.deepEqual(version.stdout.split(/\s+/).filter(Boolean), ['cairn', cairn.version]);
  const demo = spawnSync('npx', ['--no-install', 'cairn', 'demo', '--turns', '8', '--dir', join(dir, 'demo')], { encoding: 'utf8' });
  assert.equal(demo.status, 0, demo.stderr);
  assert.ok(demo.stdout.includes('returns the original, byte for byte'), demo.stdout);
  const usage = spawnSync(process.execPath, [bin, 'compact'], { encoding: 'utf8' });
  assert.equal(usage.status, 2, 'a usage error exits 2, as the binary');
});

test('agent hooks installed from the package run the package\'s command', (t) => {
  const dir = scratch(t);
  const settings = join(dir, 'settings.json');
  const env = { ...process.env, HOME: dir, CAIRN_HOME: join(dir, 'home') };
  delete env.CAIRN_EXE;
  const out = spawnSync(process.execPath, [bin, 'claude-code', 'install', '--settings', settings], { encoding: 'utf8', env });
  assert.equal(out.status, 0, out.stderr);
  const command = JSON.parse(readFileSync(settings, 'utf8')).hooks.PreCompact[0].hooks[0].command;
  assert.ok(command.startsWith(`${bin} claude-code pre-compact`), `the hook runs the package's bin, not node: ${command}`);
  // The hook runs: a session-start with nothing archived adds nothing and succeeds.
  const payload = JSON.stringify({ session_id: 's', transcript_path: join(dir, 'none.jsonl'), cwd: dir, hook_event_name: 'SessionStart', source: 'startup' });
  const ran = spawnSync('sh', ['-c', command.replace('pre-compact', 'session-start')], { input: payload, encoding: 'utf8', env });
  assert.equal(ran.status, 0, ran.stderr);
});
