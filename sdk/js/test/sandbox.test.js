import assert from 'node:assert/strict';
import { test } from 'node:test';

import { guardSandbox } from '../index.js';

test('guardSandbox makes reading the clock an error that names it; dates from values still work', () => {
  const fake = /** @type {any} */ ({ Date, performance: { now: () => 1 } });
  guardSandbox(fake);
  assert.throws(() => fake.Date.now(), /Date\.now\(\): a Cairn plugin has no clock/);
  assert.throws(() => new fake.Date(), /new Date\(\): a Cairn plugin has no clock/);
  assert.throws(() => fake.Date(), /Date\(\): a Cairn plugin has no clock/);
  assert.throws(() => fake.performance.now(), /performance\.now\(\): a Cairn plugin has no clock/);
  assert.equal(new fake.Date(0).toISOString(), '1970-01-01T00:00:00.000Z');
  assert.ok(new fake.Date(0) instanceof Date);
  assert.equal(fake.Date.UTC(2026, 0, 1), Date.UTC(2026, 0, 1));
  guardSandbox(fake); // twice is once
  assert.throws(() => fake.Date.now(), /no clock/);
});

test('stack lines of the bundle map back to the project sources the build recorded', async () => {
  const { firstOwnFrame, lineTable, mapStack } = await import('../src/stack.js');
  // Bundle line 1 ← source 0 line 1, line 2 ← source 0 line 2, line 3 unmapped, line 4 ← source 1 line 4.
  assert.deepEqual(lineTable({ sources: ['a', 'b'], mappings: 'AAAA;AACA,CAAC;;ACEA' }), [0, 1, 0, 2, -1, 0, 1, 4]);
  const table = { file: 'my-plugin.js', sources: ['cairn-sdk/src/plugin.js', 'src/index.js'], lines: [0, 138, 1, 42, -1, 0] };
  const stack = '    at compact (/my-plugin.js:2:17)\n    at compact2 (/my-plugin.js:1:118)\n    at x (/my-plugin.js:3:1)';
  assert.equal(mapStack(stack, table), '    at compact (src/index.js:42)\n    at compact2 (cairn-sdk/src/plugin.js:138)\n    at x (/my-plugin.js:3:1)');
  assert.equal(firstOwnFrame(stack, table), 'src/index.js:42');
  assert.equal(firstOwnFrame('    at compact2 (/my-plugin.js:1:118)', table), undefined, 'the SDK is not the plugin');
  assert.equal(mapStack(stack, undefined), stack, 'no table (Node tests): unchanged');
});
