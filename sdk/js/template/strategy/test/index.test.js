import assert from 'node:assert/strict';
import { test } from 'node:test';

import { fakeHost, makeEntry, part } from '@cairn/sdk/testing';

import { compact } from '../src/index.js';

/** @param {import('cairn:compaction/types@0.2.0').Entry[]} entries @param {string} [config] */
const request = (entries, config = '') => ({
  purpose: /** @type {const} */ ('compact'),
  archiveId: 'a-1',
  entries,
  protectedHead: 1,
  tailStart: entries.length - 1,
  tokenTarget: 0,
  preserve: null,
  resume: null,
  previousCheckpoint: null,
  config,
});

const conversation = () => [
  makeEntry('e0', [part.text('You are a coding agent.')], { role: 'system', origin: 'harness', pinned: true }),
  makeEntry('e1', [part.text('Fix the flaky test in ci.yml')], { role: 'user', origin: 'operator' }),
  makeEntry('e2', [part.toolCall('c1', 'bash', '{"cmd":"pytest"}')]),
  makeEntry('e3', [part.toolResult('c1', 'FAILED test_x')], { role: 'tool', origin: 'tool' }),
  makeEntry('e4', [part.toolCall('c2', 'read', '{"path":"ci.yml"}'), part.toolCall('c3', 'bash', '{}')]),
  makeEntry('e5', [part.toolResult('c2', 'jobs: …'), part.toolResult('c3', 'ok')], { role: 'tool', origin: 'tool' }),
  makeEntry('e6', [part.text('Keep the retry logic')], { role: 'user', origin: 'operator', pinned: true }),
  makeEntry('e7', [part.text('Done.')]),
];

test('older history becomes one digest, pinned entries stay', () => {
  const host = fakeHost();
  const out = compact(request(conversation()));
  assert.deepEqual(out.replaced, { first: 'e1', last: 'e6' });
  assert.deepEqual(out.replacement.map((e) => [e.id, e.origin]), [['', 'summary'], ['e6', 'operator']]);
  const digest = out.replacement[0].parts[0];
  assert.equal(digest.tag === 'text' && digest.val.split('\n').slice(1).join('\n'),
    'The operator asked, verbatim:\n- Fix the flaky test in ci.yml\n- Keep the retry logic\nThe agent made 3 tool calls: bash ×2, read ×1.]');
  assert.deepEqual(host.logs, [{ level: 'info', message: 'digesting 6 entries' }]);
});

test('a range that would split a tool call from its result shrinks to safe cuts', () => {
  fakeHost();
  const entries = conversation();
  // Protect through the call e2: its result e3 may not be cut away from it, so the range starts at e4.
  const out = compact({ ...request(entries), protectedHead: 3 });
  assert.deepEqual(out.replaced, { first: 'e4', last: 'e6' });
});

test('config is strict and nothing-to-do is reported as such', () => {
  fakeHost();
  assert.throws(() => compact(request(conversation(), '{"chars": 5}')), (e) => e.tag === 'failed' && e.val.startsWith('config: unknown field `chars`'));
  const short = conversation().slice(0, 3);
  assert.throws(() => compact(request(short)), (e) => e.tag === 'nothing-to-do');
});
