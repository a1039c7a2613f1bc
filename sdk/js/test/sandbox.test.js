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
