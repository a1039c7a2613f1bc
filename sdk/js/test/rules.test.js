// The shared rules, pinned to the cases of `host/rules/src/lib.rs` and `sdk/rust/src/helpers.rs`:
// the host checks every outcome with the Rust originals, so these must agree exactly.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { SEED_MESSAGES, SEED_MESSAGE_CHARS, charCount, clipChars, entryText, placeholderText, safeCutPoints, thousands } from '../index.js';
import { makeEntry, part } from '../src/testing.js';

const call = (id) => makeEntry('', [part.toolCall(id, 'bash', '{}')]);
const result = (id, content = 'ok') => makeEntry('', [part.toolResult(id, content)]);
const text = () => makeEntry('', [part.text('hi')]);

test('no cut falls between a call and its result', () => {
  assert.deepEqual(safeCutPoints([text(), call('a'), text(), result('a'), text()]), [true, true, false, false, true, true]);
});

test('an unanswered call does not block cuts', () => {
  assert.deepEqual(safeCutPoints([call('a'), text()]), [true, true, true]);
  assert.deepEqual(safeCutPoints([]), [true]);
});

test('the host rules read generated entries', () => {
  const mixed = makeEntry('', [part.text('a'), part.placeholder('[thinking elided]', 'artifact://a-1/1'), part.thinking('t')]);
  assert.equal(entryText(mixed), 'a\n[thinking elided]\nt\n');
  const elided = makeEntry('', [{ tag: 'tool-result', val: { callId: 'c1', content: '[elided]', isError: false, elided: 'artifact://a-1/2' } }]);
  assert.equal(entryText(elided), '[elided]\n');
  assert.deepEqual(safeCutPoints([call('c1'), mixed, result('c1'), call('c2')]), [true, false, false, true, true]);
});

test('a call answered twice is bound by its first answer', () => {
  // Rust keeps the first index per call id (`entry(..).or_insert(i)`).
  assert.deepEqual(safeCutPoints([call('a'), result('a'), text(), result('a')]), [true, false, true, true, true]);
});

test('entry text reads every part', () => {
  const entry = makeEntry('', [part.text('a'), part.toolCall('1', 'bash', '{"c":1}'), part.toolResult('1', 'out'), part.image('img://1')]);
  assert.equal(entryText(entry), 'a\nbash {"c":1}\nout\nimg://1\n');
  assert.equal(entryText(makeEntry('', [])), '');
});

test('placeholders group thousands', () => {
  assert.equal(placeholderText('elided', 1_234_567, 'artifact://a-1/2'), '[elided ~1,234,567 tokens — recover: artifact://a-1/2]');
  assert.equal(thousands(0), '0');
  assert.equal(thousands(999), '999');
  assert.equal(thousands(1_000), '1,000');
  assert.equal(thousands(80_640), '80,640');
  assert.equal(thousands(18_446_744_073_709_551_615n), '18,446,744,073,709,551,615');
  assert.throws(() => thousands(-1), RangeError);
  assert.throws(() => thousands(1.5), RangeError);
});

test('chars are Unicode scalar values, not UTF-16 units', () => {
  assert.equal(clipChars('ünïcode', 3), 'ünï');
  assert.equal(clipChars('😀😀😀', 2), '😀😀');
  assert.equal(clipChars('abc', 3), 'abc');
  assert.equal(clipChars('abc', 0), '');
  assert.equal(charCount('a😀'), 2);
});

test('seed limits match the host', () => {
  assert.equal(SEED_MESSAGES, 3);
  assert.equal(SEED_MESSAGE_CHARS, 2_000);
});
