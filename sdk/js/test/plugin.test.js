import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';

import { CommitPolicy, ModelError, Strategy, StrategyError, Trigger, commitPolicyExport, installHost, strategyExport, triggerExport } from '../index.js';
import { fakeHost } from '../src/testing.js';

afterEach(() => installHost({}));

const request = { purpose: 'compact', archiveId: 'a-1', entries: [], protectedHead: 0, tailStart: 0, tokenTarget: 0, preserve: null, resume: null, previousCheckpoint: null, config: '' };

test('the base classes have the Rust SDK defaults', () => {
  assert.throws(() => strategyExport(new Strategy())(request), (e) => e.tag === 'failed' && e.val === 'compact is not implemented by this plugin');
  const input = { usage: { contextTokens: 1, window: 2, reserve: 0 }, turn: 1, turnsSinceMaintenance: null, cooldownLeft: 0, pendingRequest: null, recentOutcomes: [], config: '' };
  assert.deepEqual(triggerExport(new Trigger())(input), { tag: 'none' });
  const boundary = { turn: 1, turnComplete: true, toolCallOutstanding: false, config: '' };
  const proposal = { strategy: 's', tokensBefore: 2, tokensAfter: 1, replacedIds: [], keptSummaryIds: [] };
  assert.deepEqual(commitPolicyExport(new CommitPolicy())(boundary, proposal), { tag: 'commit' });
});

/** @param {() => never} fail */
function strategyThrowing(fail) {
  return strategyExport(new (class extends Strategy {
    compact() {
      return fail();
    }
  })());
}

test('a strategy throws the contract variant for every kind of failure', () => {
  const host = fakeHost();
  assert.throws(strategyThrowing(() => { throw StrategyError.nothingToDo('nothing old'); }).bind(null, request), (e) => e.tag === 'nothing-to-do' && e.val === 'nothing old');
  assert.throws(strategyThrowing(() => { throw new ModelError({ tag: 'failed', val: 'HTTP 500' }); }).bind(null, request), (e) => e.tag === 'unavailable' && e.val === 'model failed: HTTP 500');
  assert.throws(strategyThrowing(() => { throw new TypeError('x is undefined'); }).bind(null, request), (e) => e.tag === 'failed' && e.val === 'uncaught TypeError: x is undefined');
  assert.equal(host.logs.length, 1);
  assert.equal(host.logs[0].level, 'error');
  assert.match(host.logs[0].message, /^uncaught TypeError: x is undefined\n/);
});

test('a trigger or commit policy that throws is logged, then traps', () => {
  const host = fakeHost();
  const decide = commitPolicyExport(new (class extends CommitPolicy {
    decide() {
      throw new RangeError('bad');
    }
  })());
  assert.throws(() => decide({ turn: 1, turnComplete: true, toolCallOutstanding: false, config: '' }, { strategy: '', tokensBefore: 0, tokensAfter: 0, replacedIds: [], keptSummaryIds: [] }), RangeError);
  assert.match(host.logs[0].message, /^uncaught RangeError: bad/);
});
