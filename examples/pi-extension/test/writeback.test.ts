/**
 * Pi session write-back, judged by Pi 0.73.1's own code: for every recorded session (Pi,
 * Claude Code, OpenAI chat), `cairn compact FILE --out-format pi` with a summarizing chain
 * writes a session that Pi's SessionManager opens as is (no migration, no rewrite), whose
 * context from Pi's `buildSessionContext` is Cairn's summary as Pi's compaction summary
 * followed by the kept messages, every tool call with its result, and which Pi's own
 * `prepareCompaction` accepts for the next compaction.
 *
 * Environment: CAIRN_SHARED (the shared transcripts folder), CAIRN_BIN (the cairn binary).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";

const shared = process.env.CAIRN_SHARED;
if (!shared) throw new Error("CAIRN_SHARED is not set: point it at the shared transcripts folder");
const cairn = process.env.CAIRN_BIN ?? "cairn";

const piRoot = import.meta.resolve("@mariozechner/pi-coding-agent");
const pi = await import("@mariozechner/pi-coding-agent");
const { SessionManager, DEFAULT_COMPACTION_SETTINGS } = pi;
const compaction = await import(new URL("./core/compaction/compaction.js", piRoot).href);

const scratch = mkdtempSync(path.join(tmpdir(), "cairn-pi-writeback-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
// A model-free chain whose outcome is a summary: the deterministic checkpoint.
const policy = path.join(scratch, "checkpoint.toml");
writeFileSync(policy, '[[chain]]\nplugin = "checkpoint-json"\ngrants = ["log", "tokens"]\n');

const recorded = ["pi", "claude-code", "openai-chat"].flatMap((dir) =>
	readdirSync(path.join(shared, dir))
		.filter((f) => f.endsWith(".jsonl") || f.endsWith(".json"))
		.map((f) => path.join(shared, dir, f)),
);

describe("Pi session write-back", () => {
	for (const file of recorded) {
		test(path.basename(file), () => {
			const out = path.join(scratch, `${path.basename(file)}.pi.jsonl`);
			// Exit 3: nothing was committed (the transcript is written back unchanged).
			const run = spawnSync(cairn, ["compact", file, "--policy", policy, "--home", path.join(scratch, "home"), "--out", out, "--out-format", "pi", "--json"], {
				encoding: "utf8",
				env: { ...process.env, CAIRN_LOG: "error" },
			});
			assert.ok(run.status === 0 || run.status === 3, `cairn compact exited ${run.status}: ${run.stderr}`);
			const report = JSON.parse(run.stdout);
			assert.equal(report.committed, run.status === 0);
			const written = readFileSync(out, "utf8");
			const sm = SessionManager.open(out);
			assert.equal(readFileSync(out, "utf8"), written, "Pi opens the file without rewriting it (already v3)");
			const branch = sm.getBranch();
			const context = sm.buildSessionContext();
			const lines = written.trim().split("\n").map((l) => JSON.parse(l));
			const entry = lines.find((l) => l.type === "compaction");
			if (report.committed_by?.startsWith("checkpoint-json")) {
				assert.ok(entry, "the summary is written as Pi's compaction entry");
				const first = context.messages[0] as { role: string; summary?: string };
				assert.equal(first.role, "compactionSummary");
				assert.equal(first.summary, entry.summary);
				// Everything after the summary is the kept part, in order.
				assert.equal(context.messages.length, lines.filter((l) => l.type !== "session" && l.type !== "compaction").length + 1);
			}
			// Every tool call in Pi's context is answered, but for a session that ended on one.
			const messages = context.messages as any[];
			const calls = new Set<string>();
			for (const m of messages) {
				if (m.role === "assistant") for (const b of m.content) if (b.type === "toolCall") calls.add(b.id);
				if (m.role === "toolResult") assert.ok(calls.delete(m.toolCallId), `result ${m.toolCallId} without its call`);
			}
			const last = messages.at(-1);
			const open = [...calls].filter((id) => !(last?.role === "assistant" && last.content.some((b: any) => b.id === id)));
			assert.deepEqual(open, [], "calls without results");
			// Pi's own next compaction accepts the session.
			// Pi's trigger sees the context's size (not zero, not the pre-compaction bill).
			const estimate = compaction.estimateContextTokens(context.messages);
			assert.ok(estimate.tokens > 0, "Pi sees a context size");
			if (report.committed_by) assert.ok(estimate.tokens < report.tokens_before, `${estimate.tokens} ≥ ${report.tokens_before} before compaction`);
			compaction.prepareCompaction(branch, DEFAULT_COMPACTION_SETTINGS);
		});
	}
});
