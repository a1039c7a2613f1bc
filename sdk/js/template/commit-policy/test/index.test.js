import assert from 'node:assert/strict';
import { test } from 'node:test';

import { fakeHost } from '@cairn/sdk/testing';

import { decide } from '../src/index.js';

/** @param {Partial<import('cairn:compaction/types@0.2.0').Boundary>} [fields] */
const boundary = (fields = {}) => ({ turn: 9, turnComplete: true, toolCallOutstanding: false, config: '', ...fields });
/** @param {number} before @param {number} after */
const proposal = (before, after) => ({ strategy: 'shake-elide@0.1.0', tokensBefore: before, tokensAfter: after, replacedIds: ['e2'], keptSummaryIds: [] });

test('commits an outcome that frees enough, between turns', () => {
  fakeHost();
  assert.deepEqual(decide(boundary(), proposal(100_000, 85_000)), { tag: 'commit' });
});

test('rejects an outcome that frees too little, saying how much it frees', () => {
  fakeHost();
  assert.deepEqual(decide(boundary(), proposal(100_000, 95_000)), { tag: 'reject', val: 'frees only 5,000 of 100,000 tokens (5%, less than 10%)' });
  assert.deepEqual(decide(boundary({ config: '{"min_freed_share": 0.04}' }), proposal(100_000, 95_000)), { tag: 'commit' });
  assert.equal(decide(boundary({ config: '{"min_freed_share": 0.2}' }), proposal(100_000, 85_000)).tag, 'reject');
});

test('defers while a tool call runs or the turn is unfinished', () => {
  fakeHost();
  assert.deepEqual(decide(boundary({ toolCallOutstanding: true }), proposal(100_000, 10_000)), { tag: 'defer', val: 'a tool call is still running' });
  assert.deepEqual(decide(boundary({ turnComplete: false }), proposal(100_000, 10_000)), { tag: 'defer', val: 'the turn is not complete' });
});

test('the question before any strategy runs only checks the boundary', () => {
  fakeHost();
  const preflight = { strategy: '', tokensBefore: 90_000, tokensAfter: 0, replacedIds: [], keptSummaryIds: [] };
  assert.deepEqual(decide(boundary(), preflight), { tag: 'commit' });
});
