import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';

import {
  ArchiveError,
  ModelError,
  StrategyError,
  askModel,
  askModelOrFallback,
  clipEllipsis,
  configOrDefaults,
  countTokens,
  installHost,
  isOperatorMessage,
  logInfo,
  messageText,
  outcome,
  parseConfig,
  pendingRequestDecision,
  putArtifact,
  rangeOf,
  readArchiveSummary,
  recount,
  replaceableRange,
  summaryEntry,
  summaryReplacement,
  tailChars,
  toolCalls,
  triggerConfig,
} from '../index.js';
import { fakeHost, makeEntry, part } from '../src/testing.js';

afterEach(() => installHost({}));

/** @param {number} cooldownLeft @param {'compact' | 'handover' | null} kind */
function triggerInput(cooldownLeft, kind) {
  return {
    usage: { contextTokens: null, window: 0, reserve: 0 },
    turn: 1,
    turnsSinceMaintenance: null,
    cooldownLeft,
    pendingRequest: kind ? { kind, preserve: '', resume: '' } : null,
    recentOutcomes: [],
    config: '',
  };
}

test('a pending request waits for the cooldown', () => {
  assert.equal(pendingRequestDecision(triggerInput(0, null)), null);
  assert.equal(pendingRequestDecision(triggerInput(2, 'compact')), null);
  assert.deepEqual(pendingRequestDecision(triggerInput(0, 'compact')), { tag: 'compact', val: 'compaction requested by the agent' });
  assert.deepEqual(pendingRequestDecision(triggerInput(0, 'handover'), 'context at 63% of the window'), {
    tag: 'handover',
    val: 'handover requested by the agent (context at 63% of the window)',
  });
});

const DEFAULTS = { max_tokens: 4096, clamp_chars: 600, operator_budget_tokens: 4000, tools: ['read'], label: null };

test('configs parse strictly and say what is wrong', () => {
  assert.deepEqual(parseConfig('', DEFAULTS), DEFAULTS);
  assert.deepEqual(parseConfig('  \n', DEFAULTS), DEFAULTS);
  const loaded = parseConfig('{"clamp_chars": 10, "label": "x"}', DEFAULTS);
  assert.deepEqual([loaded.clamp_chars, loaded.operator_budget_tokens, loaded.label], [10, 4000, 'x']);
  assert.notEqual(parseConfig('', DEFAULTS).tools, DEFAULTS.tools, 'a copy, not the defaults themselves');
  const unknown = () => parseConfig('{"clamp": 10}', DEFAULTS);
  assert.throws(unknown, (e) => e instanceof StrategyError && e.tag === 'failed' && e.message.startsWith('config: unknown field `clamp`, expected one of `max_tokens`'));
  assert.throws(() => parseConfig('{"clamp_chars": "10"}', DEFAULTS), /config: invalid type for `clamp_chars`: expected a number, found a string/);
  assert.throws(() => parseConfig('{"tools": "read"}', DEFAULTS), /expected an array, found a string/);
  assert.throws(() => parseConfig('[1]', DEFAULTS), /config: expected a JSON object, found an array/);
  assert.throws(() => parseConfig('{', DEFAULTS), /^StrategyError: config: /);
});

test('a broken trigger config falls back to the defaults with a warning', () => {
  const host = fakeHost();
  assert.deepEqual(triggerConfig('{"compact_ta": 0.8}', { compact_at: 0.75 }), { compact_at: 0.75 });
  assert.deepEqual(host.logs, [{ level: 'warn', message: 'config: unknown field `compact_ta`, expected one of `compact_at`; using the defaults' }]);
  assert.deepEqual(triggerConfig('{"compact_at": 0.8}', { compact_at: 0.75 }), { compact_at: 0.8 });
  assert.equal(configOrDefaults(() => 7, 0), 7);
});

test('tokens go through the tokens capability', () => {
  fakeHost({ tokens: (text) => text.length });
  assert.equal(countTokens('abcd'), 4);
  const entry = makeEntry('e1', [part.text('ab'), part.toolCall('c', 'ls', '{}')]);
  assert.equal(recount(entry).tokens, 'ab\nls {}\n'.length);
  installHost({});
  assert.throws(() => countTokens('x'), /the `tokens` capability is not available: add "tokens"/);
});

test('logging without the log capability does nothing', () => {
  installHost({});
  assert.doesNotThrow(() => logInfo('nobody hears this'));
});

test('entries, ranges and summaries', () => {
  const entries = [
    makeEntry('e1', [part.toolCall('c1', 'read', '{"path":"a"}')]),
    makeEntry('e2', [part.toolResult('c1', 'text of a')], { role: 'tool', origin: 'tool' }),
    makeEntry('e3', [part.text('keep this'), part.thinking('hm'), part.text('and this')], { pinned: true }),
    makeEntry('e4', [part.text('do X')], { role: 'user', origin: 'operator' }),
  ];
  assert.deepEqual([...toolCalls(entries)], [['c1', { name: 'read', args: '{"path":"a"}' }]]);
  assert.deepEqual(rangeOf(entries, 1, 2), { first: 'e2', last: 'e3' });
  assert.throws(() => rangeOf(entries, 2, 4), RangeError);
  assert.equal(messageText(entries[2]), 'keep this\nand this');
  assert.deepEqual(entries.map(isOperatorMessage), [false, false, false, true]);
  assert.deepEqual(summaryEntry('s'), { id: '', role: 'user', origin: 'summary', parts: [{ tag: 'text', val: 's' }], tokens: 0, turn: 0, pinned: false });
  assert.deepEqual(summaryReplacement(entries.slice(0, 3), 's').map((e) => e.id), ['', 'e3']);
  assert.deepEqual(outcome({ first: 'e1', last: 'e2' }, [], { seed: 'go on' }), {
    replaced: { first: 'e1', last: 'e2' },
    replacement: [],
    checkpoint: null,
    seed: 'go on',
    retrospective: null,
  });
});

test('the replaceable range lies between the protected head and the tail', () => {
  const entries = ['a', 'b', 'c', 'd'].map((id) => makeEntry(id, []));
  const request = { purpose: 'compact', archiveId: 'a-1', entries, protectedHead: 1, tailStart: 3, tokenTarget: 0, preserve: null, resume: null, previousCheckpoint: null, config: '' };
  assert.deepEqual(replaceableRange(request), { first: 1, last: 2 });
  assert.deepEqual(replaceableRange({ ...request, tailStart: 99 }), { first: 1, last: 3 });
  assert.throws(() => replaceableRange({ ...request, tailStart: 1 }), (e) => e instanceof StrategyError && e.tag === 'nothing-to-do');
});

test('clipping counts chars and trims like Rust', () => {
  assert.equal(tailChars('abcdef', 2), 'ef');
  assert.equal(tailChars('a😀b', 2), '😀b');
  assert.equal(tailChars('ab', 5), 'ab');
  assert.equal(clipEllipsis('abcdef', 6), 'abcdef');
  assert.equal(clipEllipsis('abc def', 5), 'abc…');
  assert.equal(clipEllipsis('😀😀😀', 2), '😀…');
  // U+FEFF is not white space to Rust's trim_end, U+0085 is.
  assert.equal(clipEllipsis('ab\ufeffcd', 4), 'ab\ufeff…');
  assert.equal(clipEllipsis('ab\u0085cd', 4), 'ab…');
});

test('the model answers, is denied, or is unavailable', () => {
  const asked = [];
  fakeHost({ model: (request) => (asked.push(request), 'a summary') });
  assert.equal(askModel('sys', 'user', 100), 'a summary');
  assert.deepEqual(asked[0], { messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: 'user' }], maxTokens: 100 });

  // The component runtime throws an Error carrying the variant as `payload`.
  const denied = fakeHost({ model: () => { throw Object.assign(new Error('[object Object]'), { payload: { tag: 'denied', val: 'not granted' } }); } });
  assert.equal(askModelOrFallback('s', 'u', 10, 'deterministic extraction'), null);
  assert.deepEqual(denied.logs, [{ level: 'info', message: 'model not granted: deterministic extraction' }]);

  fakeHost({ model: () => { throw { tag: 'timeout' }; } });
  assert.throws(() => askModel('s', 'u', 10), (e) => e instanceof ModelError && e.tag === 'timeout');
  assert.throws(() => askModelOrFallback('s', 'u', 10, 'x'), (e) => e instanceof StrategyError && e.tag === 'unavailable' && e.message === 'model timed out');

  fakeHost({ model: () => { throw { tag: 'unavailable', val: 'no model is configured' }; } });
  assert.throws(() => askModelOrFallback('s', 'u', 10, 'x'), /model unavailable: no model is configured/);

  fakeHost({ model: () => { throw new TypeError('a bug, not an answer'); } });
  assert.throws(() => askModel('s', 'u', 10), TypeError);
});

test('archive calls answer or throw ArchiveError', () => {
  const host = fakeHost();
  assert.equal(putArtifact('original'), 'artifact://test/1');
  assert.deepEqual(host.artifacts, ['original']);
  assert.equal(readArchiveSummary().text, '1 artifact(s) stored in this test.\n');
  fakeHost({ archive: { putArtifact: () => { throw { tag: 'denied', val: 'no archive:write grant' }; } } });
  assert.throws(() => putArtifact('x'), (e) => e instanceof ArchiveError && e.tag === 'denied' && e.message === 'denied: no archive:write grant');
});
