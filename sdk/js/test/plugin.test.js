import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';

import { CommitPolicy, History, ModelError, Strategy, StrategyError, Trigger, commitPolicyExport, installHost, original, strategyExport, triggerExport } from '../index.js';
import { fakeHost, lend, makeEntry, part } from '../src/testing.js';

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

// ---- contract 0.2.0: the lent conversation --------------------------------------------------

const conversation = () => [
  makeEntry('e0', [part.text('be brief')], { role: 'system', origin: 'harness' }),
  makeEntry('e1', [part.toolCall('c1', 'bash', '{"cmd":"make"}')]),
  makeEntry('e2', [part.toolResult('c1', 'x'.repeat(4000))], { role: 'tool', origin: 'tool' }),
  makeEntry('e3', [part.text('the linker is missing')]),
  makeEntry('e4', [part.toolCall('c2', 'bash', '{"cmd":"ls"}')]),
  makeEntry('e5', [part.toolResult('c2', 'y'.repeat(4000))], { role: 'tool', origin: 'tool' }),
  makeEntry('e6', [part.text('go on')], { role: 'user', origin: 'operator' }),
];

/**
 * The host's lent `history` over `entries`, recording every call that crosses.
 * @param {import('cairn:compaction/types@0.2.0').Entry[]} entries
 */
function lentHistory(entries) {
  /** @type {string[]} */
  const calls = [];
  const lent = new History(entries);
  return {
    calls,
    history: {
      len: () => (calls.push('len'), entries.length),
      /** @param {number} s @param {number} e */
      entries: (s, e) => (calls.push(`entries ${s} ${e}`), structuredClone(entries.slice(s, e))),
      /** @param {number} s @param {number} e */
      outlines: (s, e) => (calls.push(`outlines ${s} ${e}`), lent.outlines(s, e)),
      /** @param {number} i @param {number} p */
      partText: (i, p) => (calls.push(`partText ${i} ${p}`), lent.partText(i, p) ?? undefined),
      /** @param {number} i @param {number} p */
      partTokens: (i, p) => (calls.push(`partTokens ${i} ${p}`), i < entries.length ? 11 : undefined),
      /** @param {number} i @param {number} p */
      setAside: (i, p) => {
        calls.push(`setAside ${i} ${p}`);
        if (i === 0) throw Object.assign(new Error('err'), { payload: { tag: 'denied', val: 'archive:write is not granted' } });
        return `artifact://a-1/${i}.${p}`;
      },
    },
  };
}

/** @param {import('cairn:compaction/types@0.2.0').Entry[]} entries */
const lentRequest = (entries) => {
  const { entries: _, ...rest } = { ...request, entries, protectedHead: 1, tailStart: entries.length - 1 };
  return rest;
};

class Masker extends Strategy {
  /** @param {import('../src/conversation.js').CompactRequest} request */
  compact(request) {
    const changed = request.entries.map((entry) => ({
      ...entry,
      parts: entry.parts.map((p) => (p.tag === 'tool-result' && p.val.content.length > 100 ? { tag: /** @type {const} */ ('tool-result'), val: { ...p.val, content: '[masked]' } } : p)),
    }));
    // e2..e5: two masked results, the entries between them as they were (equal copies), one new entry.
    const added = makeEntry('', [part.text('new')], { role: 'user', origin: 'summary' });
    return { replaced: { first: 'e2', last: 'e5' }, replacement: [...changed.slice(2, 6), added], checkpoint: null, seed: null, retrospective: null };
  }
}

test('the default path reads every entry once and sends unchanged ones back as original(i)', () => {
  fakeHost();
  const entries = conversation();
  const { calls, history } = lentHistory(entries);
  const out = strategyExport(new Masker())(history, lentRequest(entries));
  assert.deepEqual(calls, ['len', 'entries 0 7']);
  assert.deepEqual(out.replacement.map((r) => (r.tag === 'original' ? r.val : r.val.id)), ['e2', 3, 4, 'e5', '']);
  const masked = out.replacement[0];
  assert.ok(masked.tag === 'entry' && masked.val.parts[0].tag === 'tool-result' && masked.val.parts[0].val.content === '[masked]');
  assert.deepEqual([out.checkpoint, out.seed, out.retrospective], [null, null, null]);
});

test('an entry changed in place or in any field goes back whole', () => {
  const entries = conversation();
  const plugin = new (class extends Strategy {
    /** @param {import('../src/conversation.js').CompactRequest} request */
    compact(request) {
      const [, e1, e2, e3] = request.entries;
      const result = e2.parts[0];
      if (result.tag === 'tool-result') result.val.content = 'changed in place';
      return { replaced: { first: 'e1', last: 'e3' }, replacement: [e1, e2, { ...e3, turn: 9 }] };
    }
  })();
  const { history } = lentHistory(entries);
  // `entries` gives the plugin the very objects whose snapshot was taken.
  history.entries = () => entries;
  const out = strategyExport(plugin)(history, lentRequest(entries));
  assert.deepEqual(out.replacement.map((r) => r.tag), ['original', 'entry', 'entry']);
  assert.deepEqual([out.checkpoint, out.seed, out.retrospective], [null, null, null]);
});

test('compactLent, when defined, is called with the lent history and the request without entries', () => {
  const artifacts = fakeHost().artifacts;
  const entries = conversation();
  /** @type {unknown[]} */
  const seen = [];
  const plugin = new (class extends Strategy {
    compact() {
      throw new Error('not called when compactLent is defined');
    }
    /** @param {InstanceType<typeof History>} history @param {import('../src/conversation.js').LentRequest} request */
    compactLent(history, request) {
      seen.push('entries' in request, history.len(), history.outlines(2, 3)[0].parts, history.partTokens(2, 0), history.partTokens(99, 0), history.partText(2, 7));
      const uri = history.setAside(2, 0);
      const masked = { ...entries[2], parts: [{ tag: /** @type {const} */ ('tool-result'), val: { callId: 'c1', content: '[masked]', isError: false, elided: uri } }] };
      return { replaced: { first: 'e2', last: 'e3' }, replacement: [masked, original(3)] };
    }
  })();
  const { calls, history } = lentHistory(entries);
  const out = strategyExport(plugin)(history, lentRequest(entries));
  assert.deepEqual(seen, [false, 7, [{ tag: 'tool-result', val: { callId: 'c1', bytes: 4000, isError: false, elided: null } }], 11, null, null]);
  assert.deepEqual(calls, ['len', 'outlines 2 3', 'partTokens 2 0', 'partTokens 99 0', 'partText 2 7', 'setAside 2 0']);
  assert.deepEqual(out.replacement[1], { tag: 'original', val: 3 });
  assert.ok(out.replacement[0].tag === 'entry' && out.replacement[0].val.parts[0].tag === 'tool-result' && out.replacement[0].val.parts[0].val.elided === 'artifact://a-1/2.0');
  assert.deepEqual(artifacts, [], 'the text was set aside by the host, not stored through the plugin');

  // Called with the whole request (contract 0.1.0's shape, and a test's): original(i) comes back whole.
  const direct = strategyExport(plugin)({ ...request, entries });
  assert.deepEqual(direct.replacement[1], entries[3]);
  assert.deepEqual(artifacts, ['x'.repeat(4000)], 'a list-backed History stores through putArtifact');
});

test('a refused set-aside is the strategy\'s unavailable error', () => {
  const plugin = new (class extends Strategy {
    /** @param {InstanceType<typeof History>} history */
    compactLent(history) {
      history.setAside(0, 0);
      return { replaced: { first: 'e0', last: 'e0' }, replacement: [] };
    }
  })();
  const entries = conversation();
  assert.throws(() => strategyExport(plugin)(lentHistory(entries).history, lentRequest(entries)), (e) => e.tag === 'unavailable' && e.val === 'archive: archive:write is not granted');
});

test('a list-backed History reads by index, clamped, and outlines count UTF-8 bytes', () => {
  fakeHost();
  const entries = conversation();
  entries[3].parts.push(part.text('héllo'), part.placeholder('[p]', 'u'), part.image('img'), part.thinking('hm'));
  const history = new History(entries);
  assert.equal(history.len(), 7);
  assert.deepEqual(history.entries(5, 99), entries.slice(5));
  assert.deepEqual(history.entries(5, 2), []);
  assert.equal(history.partText(1, 0), '{"cmd":"make"}');
  assert.equal(history.partTokens(2, 0), 1000);
  assert.deepEqual(history.outlines(3, 4)[0].parts, [
    { tag: 'text', val: 21 }, { tag: 'text', val: 6 }, { tag: 'placeholder', val: { text: '[p]', uri: 'u' } }, { tag: 'image', val: 3 }, { tag: 'thinking', val: 2 },
  ]);
  const [lent, rest] = lend({ ...request, entries });
  assert.ok(lent instanceof History && !('entries' in rest) && rest.archiveId === 'a-1');
});
