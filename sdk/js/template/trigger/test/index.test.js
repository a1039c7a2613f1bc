import assert from 'node:assert/strict';
import { test } from 'node:test';

import { fakeHost } from '@cairn/sdk/testing';

import { decide } from '../src/index.js';

/**
 * @param {number | null} tokens
 * @param {Partial<import('cairn:compaction/types@0.2.0').TriggerInput>} [fields]
 */
const input = (tokens, fields = {}) => ({
  usage: { contextTokens: tokens, window: 128_000, reserve: 16_384 },
  turn: 7,
  turnsSinceMaintenance: null,
  cooldownLeft: 0,
  pendingRequest: null,
  recentOutcomes: [],
  config: '',
  ...fields,
});

test('compacts from compact_at of the window', () => {
  fakeHost();
  assert.deepEqual(decide(input(102_400)), { tag: 'compact', val: 'context at 80% of the window (102,400 of 128,000 tokens)' });
  assert.deepEqual(decide(input(102_399)), { tag: 'none' });
  assert.equal(decide(input(70_000, { config: '{"compact_at": 0.5}' })).tag, 'compact');
});

test('unknown usage and cooldowns start nothing; a request waits for the cooldown', () => {
  fakeHost();
  assert.deepEqual(decide(input(null)), { tag: 'none' });
  assert.deepEqual(decide(input(120_000, { cooldownLeft: 2 })), { tag: 'none' });
  const asked = { kind: /** @type {const} */ ('handover'), preserve: '', resume: '' };
  assert.deepEqual(decide(input(10_000, { pendingRequest: asked, cooldownLeft: 1 })), { tag: 'none' });
  assert.deepEqual(decide(input(12_800, { pendingRequest: asked })), { tag: 'handover', val: 'handover requested by the agent (context at 10% of the window)' });
});

test('a broken config is logged and the defaults apply', () => {
  const host = fakeHost();
  assert.equal(decide(input(102_400, { config: '{"compact": 0.5}' })).tag, 'compact');
  assert.equal(host.logs[0].level, 'warn');
  assert.match(host.logs[0].message, /^config: unknown field `compact`.*; using the defaults$/);
});
