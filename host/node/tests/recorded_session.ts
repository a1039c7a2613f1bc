// Compiled by `tsc --strict` and run by node (host/cli/tests/it/node_package.rs): a TypeScript
// harness compacting a recorded session file through the package, with no `cairn` binary.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Host } from 'cairn-compaction';

const file = process.argv[2];
if (!file) throw new Error('usage: node recorded_session.js SESSION_FILE');
const host = new Host({ home: mkdtempSync(join(tmpdir(), 'cairn-ts-')) });
const answer = await host.compact('recorded', readFileSync(file, 'utf8'));
const [before, after] = [Number(answer['tokens_before']), Number(answer['tokens_after'])];
if (answer['committed'] !== true || !(after < before) || typeof answer.transcript !== 'string') {
  throw new Error(`${file}: nothing compacted: ${JSON.stringify({ ...answer, transcript: undefined })}`);
}
const recalled = await host.history('recorded', 'summary');
console.log(JSON.stringify({ tokens_before: before, tokens_after: after, archive_id: answer['archive_id'], history: recalled['text'] }));
