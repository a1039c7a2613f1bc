import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';

import { installHost } from '@cairn/sdk';
import { fakeHost } from '@cairn/sdk/testing';

import { CacheGuard, DEFAULTS, decide, loadConfig, rule, swapEconomics } from '../src/index.js';

afterEach(() => installHost({}));

const config = loadConfig('');

/** @param {Partial<import('cairn:compaction/types@0.2.0').Boundary>} [fields] */
const boundary = (fields = {}) => ({ turn: 12, turnComplete: true, toolCallOutstanding: false, config: '', ...fields });

/**
 * @param {number} before
 * @param {number} after
 * @param {string[]} [kept]
 */
const proposal = (before, after, kept = []) => ({ strategy: 'shake-elide@0.1.0', tokensBefore: before, tokensAfter: after, replacedIds: ['e3', 'e4'], keptSummaryIds: kept });

test('defaults are Sonnet list prices, a 20-turn horizon and a 100k hard limit', () => {
  assert.deepEqual(config, { input: 3, cached_input: 0.3, cache_write: 3.75, horizon_turns: 20, hard_limit_tokens: 100_000 });
  assert.deepEqual(loadConfig('{"horizon_turns": 5}'), { ...DEFAULTS, horizon_turns: 5 });
});

test('a swap that pays for its cache rewrite within the horizon commits', () => {
  // 96,449 → 59,031: saves 37,418 × $0.30/M = $0.0112 a turn; the rewrite costs
  // 59,031 × ($3.75 − $0.30)/M = $0.2037 more than a cached read: even at turn 19.
  const swap = swapEconomics(proposal(96_449, 59_031), config);
  assert.equal(swap.breakEven, 19);
  assert.ok(Math.abs(swap.savingPerTurn - 0.0112254) < 1e-6);
  assert.ok(Math.abs(swap.rewritePremium - 0.20365695) < 1e-6);
  assert.deepEqual(rule(boundary(), proposal(96_449, 59_031), config), { tag: 'commit' });
});

test('a swap that does not pay within the horizon defers and says why', () => {
  const decision = rule(boundary(), proposal(96_418, 86_478), config);
  assert.deepEqual(decision, {
    tag: 'defer',
    val:
      'keeping the warm prompt cache is cheaper: swapping 96,418 → 86,478 tokens saves $0.0030 a turn in cached reads ' +
      'but costs $0.2983 more to rewrite the cache; it breaks even only at turn 101, past the 20-turn horizon ' +
      '(commits anyway from 100,000 tokens)',
  });
  // The same swap pays off over a long enough horizon.
  assert.deepEqual(rule(boundary(), proposal(96_418, 86_478), { ...config, horizon_turns: 101 }), { tag: 'commit' });
  assert.equal(rule(boundary(), proposal(96_418, 86_478), { ...config, horizon_turns: 100 }).tag, 'defer');
});

test('past the hard limit a swap commits whatever it costs', () => {
  assert.deepEqual(rule(boundary(), proposal(100_000, 99_000), config), { tag: 'commit' });
  assert.equal(rule(boundary(), proposal(99_999, 99_000), config).tag, 'defer');
  assert.deepEqual(rule(boundary(), proposal(50_000, 49_000), { ...config, hard_limit_tokens: 40_000 }), { tag: 'commit' });
});

test('prices decide: no write surcharge, free cached reads', () => {
  // OpenAI-style automatic caching: no surcharge, but the rewrite is still billed as input.
  const openai = { ...config, input: 2.5, cached_input: 1.25, cache_write: 0 };
  assert.equal(swapEconomics(proposal(96_418, 86_478), openai).breakEven, 9);
  // Writing no dearer than reading: every swap pays at once.
  assert.equal(swapEconomics(proposal(90_000, 89_000), { ...config, input: 0.3, cache_write: 0.3 }).breakEven, 1);
  // Free cached reads: a swap never pays off.
  const free = rule(boundary(), proposal(90_000, 10_000), { ...config, cached_input: 0 });
  assert.match(free.tag === 'defer' ? free.val : '', /it never breaks even, past the 20-turn horizon/);
});

test('the turn boundary comes first, then stale summaries', () => {
  const stale = proposal(150_000, 10_000, ['s1']);
  assert.deepEqual(rule(boundary({ toolCallOutstanding: true }), stale, config), { tag: 'defer', val: 'a tool call is still running' });
  assert.deepEqual(rule(boundary({ turnComplete: false }), stale, config), { tag: 'defer', val: 'the turn is not complete' });
  assert.deepEqual(rule(boundary(), stale, config), { tag: 'reject', val: 'a stale compaction entry would stay in the kept range: s1' });
  const many = proposal(150_000, 10_000, Array.from({ length: 12 }, (_, i) => `s${i + 1}`));
  assert.equal(rule(boundary(), many, config).tag === 'reject' && rule(boundary(), many, config).val.endsWith('s9, s10 and 2 more'), true);
});

test('the pre-flight question before any strategy runs only checks the boundary', () => {
  const preflight = { strategy: '', tokensBefore: 96_449, tokensAfter: 0, replacedIds: [], keptSummaryIds: [] };
  assert.deepEqual(rule(boundary(), preflight, config), { tag: 'commit' });
  assert.deepEqual(rule(boundary({ turnComplete: false }), preflight, config), { tag: 'defer', val: 'the turn is not complete' });
});

test('a swap that frees nothing defers', () => {
  assert.deepEqual(rule(boundary(), proposal(50_000, 50_000), config), { tag: 'defer', val: 'the swap frees nothing (50,000 → 50,000 tokens)' });
});

test('a broken config is reported and never blocks a swap for its price', () => {
  for (const broken of ['{"horizon": 5}', '{"horizon_turns": 0}', '{"cached_input": -1}', '{"hard_limit_tokens": 1.5}', '{"input": "3"}', 'not json']) {
    assert.throws(() => loadConfig(broken), /config: /, broken);
    const host = fakeHost();
    const decision = new CacheGuard().decide(boundary({ config: broken }), proposal(96_418, 86_478));
    assert.deepEqual(decision, { tag: 'commit' }, broken);
    assert.equal(host.logs[0].level, 'warn');
    assert.match(host.logs[0].message, /; cache-guard defers no swap for its price until the config is fixed$/);
  }
  // The boundary rules still hold.
  fakeHost();
  assert.equal(new CacheGuard().decide(boundary({ config: '{"horizon": 5}', turnComplete: false }), proposal(96_418, 86_478)).tag, 'defer');
});

test('the export decides with the policy config and logs why a priced swap commits', () => {
  const host = fakeHost();
  assert.equal(decide(boundary({ config: '{"horizon_turns": 5}' }), proposal(96_449, 59_031)).tag, 'defer');
  assert.deepEqual(decide(boundary({ config: '{"horizon_turns": 19}' }), proposal(96_449, 59_031)), { tag: 'commit' });
  assert.deepEqual(host.logs, [
    { level: 'info', message: 'swap 96,449 → 59,031 tokens by shake-elide@0.1.0: pays for its $0.2037 cache rewrite at $0.0112 a turn by turn 19 of the 19-turn horizon' },
  ]);
});
