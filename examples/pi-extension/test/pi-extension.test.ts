/**
 * The extension against Pi 0.73.1's own code and a real `cairn serve`:
 * - Pi's extension loader loads it (the TypeScript source through jiti, as Pi does, and the
 *   compiled module these tests drive);
 * - for every recorded Pi session in $CAIRN_SHARED/pi: Pi's SessionManager opens a
 *   copy, the extension's `session_before_compact` handler runs on the branch with the event Pi
 *   builds (`prepareCompaction` → {type, preparation, branchEntries, customInstructions, signal}),
 *   the result is appended the way Pi appends it (`appendCompaction(…, fromHook = true)`), and
 *   Pi's `buildSessionContext` / `estimateTokens` / `prepareCompaction` check the new session;
 * - the session grows again (replayed tool work) and a second `session_before_compact` gives a
 *   second Cairn compaction, appended and rebuilt the same way;
 * - `session_history` finds text that Cairn elided; `turn_end` feeds `boundary`, and the
 *   compaction Cairn commits there is the one Pi applies (no second `compact`);
 * - boundaries are incremental: the whole branch once, then only the entries appended after the
 *   one Cairn acknowledged; whole again after a move in Pi's session tree and after `diverged`,
 *   with the same decisions as a whole replay.
 *
 * Environment: CAIRN_SHARED (required: the shared transcripts folder, holding pi/*.jsonl),
 * CAIRN_BIN (the cairn binary; `cairn` on PATH otherwise).
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import type {
	CompactionResult,
	CompactionEntry,
	ExtensionContext,
	SessionEntry,
	SessionManager as SessionManagerType,
} from "@mariozechner/pi-coding-agent";
import type { AgentMessage } from "@mariozechner/pi-agent-core";

const here = path.dirname(fileURLToPath(import.meta.url)); // dist/test
const root = path.resolve(here, "..", ".."); // the package folder

// ---- environment ------------------------------------------------------------------------------

const shared = process.env.CAIRN_SHARED;
if (!shared) throw new Error("CAIRN_SHARED is not set: point it at the shared transcripts folder, holding pi/*.jsonl");
const sessionsDir = path.join(shared, "pi");
if (!existsSync(sessionsDir)) throw new Error(`CAIRN_SHARED: ${sessionsDir} does not exist`);
const sessionFiles = readdirSync(sessionsDir)
	.filter((f) => f.endsWith(".jsonl"))
	.sort();
if (sessionFiles.length === 0) throw new Error(`CAIRN_SHARED: no *.jsonl in ${sessionsDir}`);

// A home of our own: the tests never touch the user's Cairn record.
const scratch = mkdtempSync(path.join(tmpdir(), "cairn-pi-test-"));
process.env.CAIRN_HOME = path.join(scratch, "home");
if (!process.env.CAIRN_BIN) console.log("# CAIRN_BIN is not set: using `cairn` on PATH");

// ---- Pi's own modules (deep imports resolve to the same instances as the root) ---------------

const piRoot = import.meta.resolve("@mariozechner/pi-coding-agent");
const deep = (rel: string) => import(new URL(rel, piRoot).href);
const pi = await import("@mariozechner/pi-coding-agent");
const { SessionManager, buildSessionContext, DEFAULT_COMPACTION_SETTINGS, calculateContextTokens } = pi;
const compaction = await deep("./core/compaction/compaction.js");
const prepareCompaction = compaction.prepareCompaction as (entries: SessionEntry[], settings: unknown) => any;
const estimateTokens = compaction.estimateTokens as (m: AgentMessage) => number;
const estimateContextTokens = compaction.estimateContextTokens as (m: AgentMessage[]) => { tokens: number };
const loader = await deep("./core/extensions/loader.js");
const { createEventBus } = await deep("./core/event-bus.js");

// The extension's own helpers (compiled).
const ext = await import("../src/index.js");

type Handler = (event: unknown, ctx: ExtensionContext) => Promise<unknown>;

interface Loaded {
	handlers: Map<string, Handler[]>;
	tools: Map<string, { definition: { execute: (...args: any[]) => Promise<any> } }>;
	runtime: { sendMessage: (...args: any[]) => void };
	events: { on(channel: string, h: (data: unknown) => void): () => void; emit(channel: string, data: unknown): void };
}

/** Loads an extension file with Pi's loader (jiti), the way Pi does at startup. */
async function loadWithPi(file: string): Promise<Loaded> {
	const events = createEventBus();
	const result = await loader.loadExtensions([file], scratch, events);
	assert.deepEqual(result.errors, [], `Pi's loader reported errors for ${file}`);
	assert.equal(result.extensions.length, 1);
	const loaded = result.extensions[0];
	return { handlers: loaded.handlers, tools: loaded.tools, runtime: result.runtime, events };
}

/**
 * Waits for the work turn_end and agent_end left running (they return at once, as Pi's JSON
 * mode needs): the extension's `cairn:settle` hook on Pi's event bus.
 */
function settled(loaded: Loaded): Promise<void> {
	return new Promise((resolve) => loaded.events.emit("cairn:settle", resolve));
}

function handler(loaded: Loaded, name: string): Handler {
	const list = loaded.handlers.get(name);
	assert.ok(list && list.length === 1, `one ${name} handler`);
	return list[0]!;
}

interface Recorded {
	notices: Array<{ message: string; level?: string }>;
	compactCalls: number;
}

/** An ExtensionContext for a session (what Pi's runner hands handlers), with a recording UI. */
function contextFor(sm: SessionManagerType, cwd: string, recorded: Recorded, window = 200_000): ExtensionContext {
	const ctx = {
		ui: {
			notify: (message: string, level?: string) => recorded.notices.push({ message, level }),
		},
		hasUI: true,
		cwd,
		sessionManager: sm,
		modelRegistry: undefined,
		model: { contextWindow: window },
		isIdle: () => true,
		signal: undefined,
		abort: () => {},
		hasPendingMessages: () => false,
		shutdown: () => {},
		getContextUsage: () => undefined,
		compact: () => {
			recorded.compactCalls++;
		},
		getSystemPrompt: () => "",
	};
	return ctx as unknown as ExtensionContext;
}

/** Pi's chars/4 estimate of a context (usage numbers in kept messages describe the old context). */
function estimate(messages: AgentMessage[]): number {
	return messages.reduce((sum, m) => sum + estimateTokens(m), 0);
}

/** Tool results whose call is not earlier in the context; calls with no result after them. */
function pairing(messages: AgentMessage[]): { orphanResults: string[]; unansweredCalls: string[] } {
	const calls = new Set<string>();
	const answered = new Set<string>();
	const orphanResults: string[] = [];
	for (const m of messages as any[]) {
		if (m.role === "assistant" && Array.isArray(m.content)) {
			for (const b of m.content) if (b.type === "toolCall") calls.add(b.id);
		} else if (m.role === "toolResult") {
			if (calls.has(m.toolCallId)) answered.add(m.toolCallId);
			else orphanResults.push(m.toolCallId);
		}
	}
	return { orphanResults, unansweredCalls: [...calls].filter((id) => !answered.has(id)) };
}

function textOf(entry: SessionEntry): string {
	if (entry.type !== "message") return "";
	const m = entry.message as any;
	if (typeof m.content === "string") return m.content;
	if (!Array.isArray(m.content)) return "";
	return m.content
		.filter((b: any) => b.type === "text" && typeof b.text === "string")
		.map((b: any) => b.text)
		.join("\n");
}

/** A line of an entry before the kept tail that the summary does not carry and no other entry has. */
function elidedLine(prefix: SessionEntry[], all: SessionEntry[], summary: string): { entry: SessionEntry; line: string } | undefined {
	const texts = all.map(textOf);
	const candidates = prefix
		.filter((e) => e.type === "message" && (e.message as any).role === "toolResult")
		.map((e) => ({ e, text: textOf(e) }))
		.filter(({ text }) => text.length > 1500)
		.sort((a, b) => b.text.length - a.text.length);
	for (const { e, text } of candidates) {
		for (const raw of text.split("\n")) {
			const line = raw.trim();
			if (line.length < 40 || line.length > 160) continue;
			const words = line.split(/[^A-Za-z0-9]+/).filter((w) => w.length >= 3);
			if (words.length < 5) continue;
			if (summary.includes(line)) continue;
			if (texts.filter((t) => t.includes(line)).length !== 1) continue;
			return { entry: e, line };
		}
	}
	return undefined;
}

/** An assistant message as a provider returns it; its usage is the context it was sent (`tokens`). */
function assistantMessage(content: unknown[], stopReason: "stop" | "toolUse", tokens: number, timestamp: number) {
	return {
		role: "assistant",
		content,
		api: "anthropic-messages",
		provider: "anthropic",
		model: "claude-test",
		usage: {
			input: tokens,
			output: 20,
			cacheRead: 0,
			cacheWrite: 0,
			totalTokens: tokens + 20,
			cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
		},
		stopReason,
		timestamp,
	};
}

/** One more exchange; its reply reports the context Pi would send now (chars/4 estimate). */
function exchange(sm: SessionManagerType, text: string) {
	const tokens = estimate(sm.buildSessionContext().messages);
	const now = Date.now();
	sm.appendMessage({ role: "user", content: [{ type: "text", text }], timestamp: now } as any);
	const reply = assistantMessage([{ type: "text", text: `Done: ${text}` }], "stop", tokens, now + 1);
	sm.appendMessage(reply as any);
	return { reply, tokens: tokens + 20 };
}

/** A real tool call of the recorded session and its result (text of 300–30,000 chars). */
interface ToolWork {
	name: string;
	arguments: Record<string, unknown>;
	result: any;
}

function recordedToolWork(branch: SessionEntry[]): ToolWork[] {
	const calls = new Map<string, { name: string; arguments: Record<string, unknown> }>();
	const work: ToolWork[] = [];
	for (const e of branch) {
		if (e.type !== "message") continue;
		const m = e.message as any;
		if (m.role === "assistant" && Array.isArray(m.content)) {
			for (const b of m.content) if (b.type === "toolCall") calls.set(b.id, { name: b.name, arguments: b.arguments ?? {} });
		} else if (m.role === "toolResult" && !m.isError) {
			const call = calls.get(m.toolCallId);
			const size = textOf(e).length;
			if (call && (call.name === "read" || call.name === "bash") && size >= 300 && size <= 30_000) {
				work.push({ ...call, result: m });
			}
		}
	}
	return work;
}

/**
 * The agent works on: rounds of a user request, assistant tool calls (the recorded session's
 * own reads and commands, replayed with fresh call ids) each followed by its result, and a
 * closing reply, until Pi's context (chars/4) reaches `target`. Every assistant message reports
 * the context it was sent as its usage.
 */
function growSession(sm: SessionManagerType, work: ToolWork[], target: number): { rounds: number; calls: number } {
	let rounds = 0;
	let calls = 0;
	let t = Date.now();
	while (estimate(sm.buildSessionContext().messages) < target) {
		assert.ok(rounds < 1000, "the session grows");
		rounds++;
		const first = work[calls % work.length]!;
		sm.appendMessage({
			role: "user",
			content: [{ type: "text", text: `Round ${rounds}: look at ${first.name} ${JSON.stringify(first.arguments).slice(0, 120)} again and fix what is left.` }],
			timestamp: t++,
		} as any);
		for (let k = 0; k < 3; k++) {
			const w = work[calls % work.length]!;
			const id = `toolu_replay_${rounds}_${k}`;
			calls++;
			const tokens = estimate(sm.buildSessionContext().messages);
			sm.appendMessage(
				assistantMessage(
					[
						{ type: "text", text: `Checking with ${w.name}.` },
						{ type: "toolCall", id, name: w.name, arguments: w.arguments },
					],
					"toolUse",
					tokens,
					t++,
				) as any,
			);
			sm.appendMessage({ ...w.result, toolCallId: id, timestamp: t++ } as any);
		}
		const tokens = estimate(sm.buildSessionContext().messages);
		sm.appendMessage(assistantMessage([{ type: "text", text: `Round ${rounds} done: the change is in and the checks pass.` }], "stop", tokens, t++) as any);
	}
	return { rounds, calls };
}

// ---- tests ------------------------------------------------------------------------------------

after(() => {
	rmSync(scratch, { recursive: true, force: true });
});

test("Pi's loader loads the TypeScript source (as installed into Pi)", async () => {
	const loaded = await loadWithPi(path.join(root, "src", "index.ts"));
	for (const event of ["session_before_compact", "turn_end", "agent_end", "session_shutdown"]) {
		assert.ok(loaded.handlers.get(event)?.length, `handles ${event}`);
	}
	assert.deepEqual([...loaded.tools.keys()].sort(), ["context_maintenance", "session_history"]);
});

test("conversation keys and the session text", () => {
	assert.equal(ext.conversationKey("ffae836b-9420-4060-ac13-7745215f90ff"), "pi-ffae836b-9420-4060-ac13-7745215f90ff");
	assert.match(ext.conversationKey("Some ID/with spaces".repeat(10)), /^[a-z0-9._-]{1,64}$/);
	const text = ext.sessionText(null, [], { id: "x", cwd: "/w" });
	assert.equal(JSON.parse(text.trim()).type, "session");
});

test("appendedSince: the entries after the acknowledged one, or none to follow", () => {
	const e = (id: string, type = "message") => ({ type, id, parentId: null, timestamp: "t", message: { role: "user", content: id } }) as unknown as SessionEntry;
	const branch = [e("a"), e("b"), e("c")];
	assert.deepEqual(ext.appendedSince(branch, "a")?.map((x) => x.id), ["b", "c"]);
	assert.deepEqual(ext.appendedSince(branch, "c"), [], "nothing appended: an empty fragment");
	assert.equal(ext.appendedSince(branch, "x"), undefined, "not on the branch: whole");
	assert.equal(ext.appendedSince(branch, undefined), undefined, "nothing acknowledged: whole");
	assert.equal(ext.appendedSince([...branch, e("k", "compaction"), e("d")], "b"), undefined, "a Pi compaction after it: whole");
	assert.equal(ext.fragmentText([]), "");
	assert.deepEqual(ext.fragmentText(branch.slice(1)).split("\n").filter(Boolean).map((l) => JSON.parse(l).id), ["b", "c"]);
});

test("compactionFromReport: Pi's rules for the kept tail", () => {
	const msg = (id: string, parentId: string | null, message: unknown) => ({ type: "message", id, parentId, timestamp: "t", message }) as SessionEntry;
	const branch: SessionEntry[] = [
		msg("u1", null, { role: "user", content: "start", timestamp: 1 }),
		msg("a1", "u1", { role: "assistant", content: [{ type: "toolCall", id: "c1", name: "read", arguments: {} }, { type: "toolCall", id: "c2", name: "read", arguments: {} }] }),
		msg("r1", "a1", { role: "toolResult", toolCallId: "c1", content: [{ type: "text", text: "one" }] }),
		msg("r2", "r1", { role: "toolResult", toolCallId: "c2", content: [{ type: "text", text: "two" }] }),
		msg("a2", "r2", { role: "assistant", content: [{ type: "text", text: "done" }] }),
	];
	const report = { tokens_before: 100, tokens_after: 50, committed_by: "p", archive_id: "a-0123456789abcdef", artifacts: [], first_kept_entry_id: "r2", prefix_summary: "S" };
	// A tail that would start with a tool result: the result moves into the summary.
	const moved = ext.compactionFromReport(report, branch, "k");
	assert.ok(moved.ok);
	assert.equal(moved.compaction.firstKeptEntryId, "a2");
	assert.equal(moved.compaction.summary, "S\n[tool result]\ntwo");
	assert.equal(ext.compactionFromReport({ ...report, committed_by: null }, branch, "k").ok, false);
	assert.equal(ext.compactionFromReport({ ...report, first_kept_entry_id: null }, branch, "k").ok, false);
	assert.equal(ext.compactionFromReport({ ...report, first_kept_entry_id: "elsewhere" }, branch, "k").ok, false);
	// Cairn keeps an earlier compaction's summary: Pi cannot, so it joins the new summary.
	const withOld: SessionEntry[] = [
		...branch,
		{ type: "compaction", id: "c0", parentId: "a2", timestamp: "t", summary: "OLD", firstKeptEntryId: "a2", tokensBefore: 9 } as SessionEntry,
		msg("u2", "c0", { role: "user", content: "more", timestamp: 2 }),
	];
	const old = ext.compactionFromReport({ ...report, first_kept_entry_id: "c0" }, withOld, "k");
	assert.ok(old.ok);
	assert.equal(old.compaction.summary, "S\n\nOLD");
	assert.equal(old.compaction.firstKeptEntryId, "a2");
	assert.deepEqual(old.compaction.details, { cairn: true, conversation: "k", archive_id: "a-0123456789abcdef", artifacts: [], committed_by: "p", tokens_after: 50 });
});

test("print mode: after session_shutdown no handler starts a server or touches the stale ctx", async () => {
	// Pi's print mode shuts the session down as soon as the prompt returns; handlers still queued
	// (turn_end, agent_end, the automatic compaction after it) then run on an invalidated ctx.
	const dir = mkdtempSync(path.join(scratch, "shutdown-"));
	const starts = path.join(dir, "starts");
	const fake = path.join(dir, "cairn");
	writeFileSync(fake, `#!/bin/sh\necho start >> '${starts}'\nexit 3\n`, { mode: 0o755 });
	const loaded: Loaded = { handlers: new Map(), tools: new Map(), runtime: { sendMessage: () => {} }, events: { on: () => () => {}, emit: () => {} } };
	const api = {
		on: (name: string, h: Handler) => loaded.handlers.set(name, [...(loaded.handlers.get(name) ?? []), h]),
		registerTool: (definition: any) => loaded.tools.set(definition.name, { definition }),
		sendMessage: () => {},
		events: { emit: () => {}, on: () => () => {} },
	};
	ext.createCairnExtension({ env: { CAIRN_BIN: fake } })(api as any);
	const recorded: Recorded = { notices: [], compactCalls: 0 };
	const sm = SessionManager.inMemory(dir);
	const live = contextFor(sm, dir, recorded);
	// A stale ctx: every getter throws, as Pi's runner does after invalidate().
	const stale = new Proxy({}, { get: () => { throw new Error("This extension ctx is stale"); } }) as ExtensionContext;

	const started = Date.now();
	await handler(loaded, "agent_start")({ type: "agent_start" }, live);
	// agent_end is still queued when shutdown begins: shutdown waits for it.
	const shutdown = handler(loaded, "session_shutdown")({ type: "session_shutdown", reason: "quit" }, live);
	await new Promise((r) => setTimeout(r, 120));
	let finished = false;
	void shutdown.then(() => (finished = true));
	await new Promise((r) => setImmediate(r));
	assert.equal(finished, false, "shutdown waits for the queued agent_end");
	await handler(loaded, "agent_end")({ type: "agent_end", messages: [] }, live);
	await shutdown;
	assert.ok(Date.now() - started < 5_000);

	// Late handlers: nothing thrown, nothing started, a late compaction is cancelled (not left to Pi's summarizer).
	await handler(loaded, "turn_end")({ type: "turn_end", turnIndex: 0, message: { role: "assistant", stopReason: "toolUse" }, toolResults: [] }, stale);
	await handler(loaded, "agent_end")({ type: "agent_end", messages: [] }, stale);
	const late = await handler(loaded, "session_before_compact")(
		{ type: "session_before_compact", preparation: {}, branchEntries: [], signal: new AbortController().signal },
		stale,
	);
	assert.deepEqual(late, { cancel: true });
	// Even with a ctx that still answers (another extension's shutdown handler awaiting), no server starts.
	await handler(loaded, "turn_end")({ type: "turn_end", turnIndex: 0, message: { role: "assistant", stopReason: "stop" }, toolResults: [] }, live);
	await assert.rejects(loaded.tools.get("session_history")!.definition.execute("c", { action: "summary" }, undefined, undefined, live), /shut/);
	assert.equal(existsSync(starts), false, "no cairn serve was started after shutdown");
	assert.deepEqual(recorded.notices, []);
});

test("boundaryUsage: Pi's last usage and the entries after it", () => {
	const calc = (u: any) => u.totalTokens;
	const e = (id: string, message: unknown) => ({ type: "message", id, parentId: null, timestamp: "t", message }) as SessionEntry;
	const branch = [
		e("a1", { role: "assistant", content: [], usage: { totalTokens: 500 }, stopReason: "toolUse" }),
		e("r1", { role: "toolResult", toolCallId: "x", content: [] }),
		{ type: "thinking_level_change", id: "t", parentId: null, timestamp: "t", thinkingLevel: "high" } as SessionEntry,
		e("a2", { role: "assistant", content: [], usage: { totalTokens: 900 }, stopReason: "aborted" }),
	];
	assert.deepEqual(ext.boundaryUsage(branch, calc), { reported_tokens: 500, entries_after: 2 });
	assert.equal(ext.boundaryUsage([...branch, { type: "compaction", id: "c", parentId: null, timestamp: "t", summary: "s", firstKeptEntryId: "a1", tokensBefore: 1 } as SessionEntry], calc), "counted");
	assert.equal(ext.turnNumber(branch), 2);
});

test("cairn serve --expose all: the tools, structured errors, session_history before any compaction", async () => {
	const server = await ext.CairnServer.start({ bin: ext.cairnBinary(), conversation: "pi-tools-check", cwd: scratch });
	try {
		const names = (await server.toolNames()).sort();
		for (const t of [
			"artifact_get",
			"boundary",
			"compact",
			"context_maintenance",
			"handover",
			"notices_ack",
			"notices_take",
			"plugins_list",
			"policy_reload",
			"policy_set",
			"request",
			"session_history",
		]) {
			assert.ok(names.includes(t), `lists ${t} (got ${names.join(", ")})`);
		}
		// Errors are structured ({error}); the message reaches the caller, not a schema mismatch.
		await assert.rejects(server.call("compact", { conversation: "Not A Key!", transcript: "" }), (error: Error) => {
			assert.ok(error instanceof ext.CairnToolError, String(error));
			assert.match(error.message, /^cairn compact: conversation: /);
			return true;
		});
		await assert.rejects(server.call("boundary", { conversation: "pi-tools-check", turn: 1, transcript: "not a session", window: 1000 }), /cairn boundary: transcript/);
		// session_history before any compaction: an empty summary, not an error.
		const history = await server.callRaw("session_history", { action: "summary" });
		assert.equal(history.isError, false, JSON.stringify(history));
		assert.equal(typeof (history.structuredContent as any)?.text, "string");
	} finally {
		await server.close();
	}
});

test("incremental boundaries on a recorded Pi session: whole once, then the appended entries; whole after a move in the tree and after diverged", async () => {
	const file = sessionFiles.includes("pi-mono__large-session.jsonl") ? "pi-mono__large-session.jsonl" : sessionFiles[0]!;
	const loaded = await loadWithPi(path.join(root, "dist", "src", "index.js"));
	loaded.runtime.sendMessage = () => {};
	// A copy under a session id of its own: its own Cairn conversation.
	const dir = mkdtempSync(path.join(scratch, "incremental-"));
	const [head, ...rest] = readFileSync(path.join(sessionsDir, file), "utf8").split("\n");
	writeFileSync(path.join(dir, file), [JSON.stringify({ ...JSON.parse(head!), id: randomUUID() }), ...rest].join("\n"));
	const sm = SessionManager.open(path.join(dir, file), dir);
	const key = ext.conversationKey(sm.getSessionId());
	const rec: Recorded = { notices: [], compactCalls: 0 };
	const events: any[] = [];
	const off = loaded.events.on("cairn:boundary", (data) => events.push(data));
	// A window the context fills to ~68%: Cairn advises every 5th turn and compacts never.
	const window = Math.ceil((estimate(sm.buildSessionContext().messages) + 20) / 0.68);
	const ctx = contextFor(sm, dir, rec, window);
	/** The branch at each turn_end and the turn_end's message, for the whole replay. */
	const turns: Array<{ branch: SessionEntry[]; message: any }> = [];
	const turnEnd = (message: any) => {
		turns.push({ branch: sm.getBranch(), message });
		return handler(loaded, "turn_end")({ type: "turn_end", turnIndex: 0, message, toolResults: [] }, ctx);
	};
	/** A turn that calls a tool: the assistant's call and its result. */
	const toolTurn = (n: number) => {
		const tokens = estimate(sm.buildSessionContext().messages);
		const now = Date.now();
		const reply = assistantMessage([{ type: "toolCall", id: `toolu_inc_${n}`, name: "bash", arguments: { command: `ls step${n}` } }], "toolUse", tokens, now);
		sm.appendMessage(reply as any);
		sm.appendMessage({ role: "toolResult", toolCallId: `toolu_inc_${n}`, toolName: "bash", content: [{ type: "text", text: `step${n}.txt` }], isError: false, timestamp: now + 1 } as any);
		return reply;
	};
	const fail = (what: string) => `${what}\nevents: ${JSON.stringify(events.map((e) => ({ sent: e.sent, kind: e.result.action.kind, acknowledged: e.result.acknowledged })))}\nnotices: ${JSON.stringify(rec.notices)}`;
	try {
		const forkAt = sm.getLeafId()!; // the recorded session's last entry: the move in the tree goes back here
		// 1. Six turns: an exchange, a tool turn, its answer; then two turn_ends back to back (the
		//    second's `since` is known only once the first answered); then a turn_end with nothing new.
		await turnEnd(exchange(sm, "Check the build.").reply);
		await settled(loaded);
		await turnEnd(toolTurn(1));
		await turnEnd(exchange(sm, "Now the tests.").reply);
		await settled(loaded);
		await turnEnd(exchange(sm, "And the docs.").reply);
		await turnEnd(exchange(sm, "And the changelog.").reply);
		await turnEnd(turns.at(-1)!.message);
		await settled(loaded);
		assert.equal(events.length, 6, fail("every turn_end reached boundary"));
		const [first, ...later] = events.slice(0, 6);
		assert.equal(first.conversation, key);
		assert.deepEqual(first.sent, { incremental: false, bytes: first.sent.bytes, since: null, resent_after_diverged: false }, fail("the first boundary is whole"));
		const whole = ext.sessionText(sm.getHeader(), turns[0]!.branch, { id: sm.getSessionId(), cwd: dir });
		assert.equal(first.sent.bytes, Buffer.byteLength(whole, "utf8"), "bytes: the whole session text");
		for (const [i, e] of events.slice(0, 6).entries()) {
			const last = turns[i]!.branch.at(-1)!;
			assert.equal(e.result.acknowledged, last.id, fail(`boundary ${i + 1} acknowledges the branch's last entry`));
			if (i === 0) continue;
			assert.equal(e.sent.incremental, true, fail(`boundary ${i + 1} is incremental`));
			assert.equal(e.sent.since, events[i - 1].result.acknowledged, fail(`boundary ${i + 1} follows the entry acknowledged before it`));
			const appended = turns[i]!.branch.slice(turns[i - 1]!.branch.length);
			assert.equal(e.sent.bytes, Buffer.byteLength(ext.fragmentText(appended), "utf8"), `boundary ${i + 1} sends the ${appended.length} entries appended`);
			assert.ok(e.sent.bytes * 50 < first.sent.bytes, fail(`boundary ${i + 1}: ${e.sent.bytes} bytes, a small fraction of ${first.sent.bytes}`));
		}
		assert.equal(events[5].sent.bytes, 0, "a turn_end with nothing appended sends an empty fragment");
		const incrementalBytes = later.reduce((sum, e) => sum + e.sent.bytes, 0);
		console.log(`# ${file}: boundary bytes: whole ${first.sent.bytes}, then ${later.map((e) => e.sent.bytes).join(", ")} incremental (${incrementalBytes} in all)`);

		// 2. A move in Pi's session tree: back to the recorded session's end, and on from there. The
		//    acknowledged entry is off the branch: whole, and no error.
		sm.branch(forkAt);
		await turnEnd(exchange(sm, "Another way: start over from the recorded end.").reply);
		await settled(loaded);
		const moved = events[6];
		assert.ok(moved, fail("the boundary after the move ran"));
		assert.deepEqual([moved.sent.incremental, moved.sent.resent_after_diverged, moved.totals.diverged], [false, false, 0], fail("after the move: whole, not after a diverged call"));
		assert.equal(moved.result.acknowledged, turns[6]!.branch.at(-1)!.id);
		await turnEnd(exchange(sm, "Go on on the new branch.").reply);
		await settled(loaded);
		assert.equal(events[7]?.sent.incremental, true, fail("incremental again on the new branch"));

		// 3. The record changes behind the extension's back: another server on the same home and
		//    conversation reports a whole, different history (the branch without its last exchange).
		//    The next incremental call diverges; the extension sends that boundary whole at once.
		const other = await ext.CairnServer.start({ bin: ext.cairnBinary(), conversation: key, cwd: dir });
		const replay = await ext.CairnServer.start({ bin: ext.cairnBinary(), conversation: `pi-whole-${randomUUID()}`, cwd: dir });
		try {
			const shorter = sm.getBranch().slice(0, -2);
			const behind = await other.call<any>("boundary", {
				conversation: key,
				turn: ext.turnNumber(shorter),
				transcript: ext.sessionText(sm.getHeader(), shorter, { id: sm.getSessionId(), cwd: dir }),
				window,
				include_transcript: false,
			});
			assert.equal(behind.acknowledged, shorter.at(-1)!.id);
			await turnEnd(exchange(sm, "And after the other client.").reply);
			await settled(loaded);
			const resent = events[8];
			assert.ok(resent, fail("the boundary after the other client ran"));
			assert.deepEqual(
				[resent.sent.incremental, resent.sent.since, resent.sent.resent_after_diverged, resent.totals.diverged],
				[false, null, true, 1],
				fail("a diverged fragment is sent again whole, once"),
			);
			assert.equal(resent.result.acknowledged, turns[8]!.branch.at(-1)!.id, "the turn is recorded all the same");
			await turnEnd(exchange(sm, "And one more.").reply);
			await settled(loaded);
			assert.deepEqual([events[9]?.sent.incremental, events[9]?.sent.resent_after_diverged], [true, false], fail("incremental again after it"));

			// Pi compacts by itself (its compaction entry, then session_compact): whole again.
			const branchNow = sm.getBranch();
			sm.appendCompaction("Pi's own summary of the work so far.", branchNow.at(-2)!.id, 1000, undefined, false);
			await handler(loaded, "session_compact")({ type: "session_compact", compactionEntry: sm.getLeafEntry(), fromExtension: false }, ctx);
			await turnEnd(exchange(sm, "Go on after Pi's compaction.").reply);
			await settled(loaded);
			assert.deepEqual([events[10]?.sent.incremental, events[10]?.sent.resent_after_diverged], [false, false], fail("after Pi's compaction: whole"));
			await turnEnd(exchange(sm, "And on.").reply);
			await settled(loaded);
			assert.equal(events[11]?.sent.incremental, true, fail("incremental again after Pi's compaction"));
			assert.ok(!rec.notices.some((n) => n.level === "warning" || n.level === "error"), fail("no boundary failed"));

			// 4. The same turns, each sent whole to a conversation of its own: the same decisions.
			const kinds: string[] = [];
			for (const [i, t] of turns.entries()) {
				const m = t.message as { role?: string; stopReason?: string };
				const out = await replay.call<any>("boundary", {
					conversation: replay.conversation,
					turn: ext.turnNumber(t.branch),
					transcript: ext.sessionText(sm.getHeader(), t.branch, { id: sm.getSessionId(), cwd: dir }),
					window,
					reserve: 16_384,
					usage: ext.boundaryUsage(t.branch, calculateContextTokens),
					turn_complete: m.role !== "assistant" || m.stopReason !== "toolUse",
					tool_call_outstanding: false,
					include_transcript: false,
				});
				const got = events[i].result;
				kinds.push(got.action.kind);
				assert.deepEqual(
					[got.action.kind, got.usage, got.advice, got.acknowledged],
					[out.action.kind, out.usage, out.advice, out.acknowledged],
					fail(`boundary ${i + 1} decides as the whole replay`),
				);
			}
			console.log(`# ${file}: ${events.length} boundaries (${kinds.join(", ")}), as a whole replay decides`);
			assert.ok(kinds.includes("advised") && kinds.includes("none"), `the replay has decisions to compare: ${kinds.join(", ")}`);
			assert.ok(!kinds.includes("compacted"), "Cairn compacted nothing");
		} finally {
			await other.close();
			await replay.close();
		}
	} finally {
		off();
		await handler(loaded, "session_shutdown")({ type: "session_shutdown", reason: "quit" }, ctx);
	}
});

for (const file of sessionFiles) {
	describe(`session ${file}`, () => {
		let loaded: Loaded;
		let dir: string;
		let copy: string;
		let sm: SessionManagerType;
		let recorded: Recorded;
		let ctx: ExtensionContext;
		let branchBefore: SessionEntry[];
		let result: { compaction: CompactionResult<any> } | undefined;
		let contextBeforeFirst = 0; // chars/4 estimate of the context Pi first compacted

		before(async () => {
			// The compiled extension, loaded by Pi's loader (same registration path as the source).
			loaded = await loadWithPi(path.join(root, "dist", "src", "index.js"));
			loaded.runtime.sendMessage = () => {};
			dir = mkdtempSync(path.join(scratch, "session-"));
			copy = path.join(dir, file);
			copyFileSync(path.join(sessionsDir, file), copy); // SessionManager.open rewrites old versions
			sm = SessionManager.open(copy, dir);
			recorded = { notices: [], compactCalls: 0 };
			ctx = contextFor(sm, dir, recorded);
		});

		after(async () => {
			await handler(loaded, "session_shutdown")({ type: "session_shutdown", reason: "quit" }, ctx);
		});

		test("session_before_compact returns Cairn's compaction, Pi appends it, the context shrinks", async () => {
			branchBefore = sm.getBranch();
			const contextBefore = buildSessionContext(sm.getEntries(), sm.getLeafId()).messages;
			const preparation = prepareCompaction(branchBefore, DEFAULT_COMPACTION_SETTINGS);
			assert.ok(preparation, "Pi would compact this session (prepareCompaction gives a preparation)");

			const started = Date.now();
			const event = {
				type: "session_before_compact",
				preparation,
				branchEntries: branchBefore,
				customInstructions: undefined,
				signal: new AbortController().signal,
			};
			result = (await handler(loaded, "session_before_compact")(event, ctx)) as typeof result;
			const millis = Date.now() - started;
			assert.ok(result?.compaction, `the handler returned a compaction (notices: ${JSON.stringify(recorded.notices)})`);
			const c = result.compaction;
			assert.equal(typeof c.summary, "string");
			assert.ok(c.summary.length > 0);
			assert.ok(branchBefore.some((e) => e.id === c.firstKeptEntryId), "firstKeptEntryId is on the branch");
			assert.ok(Number.isInteger(c.tokensBefore) && c.tokensBefore > 0);
			assert.equal(c.details.cairn, true);
			assert.match(c.details.archive_id, /^a-[0-9a-f]{16}$/);
			assert.ok(Array.isArray(c.details.artifacts));
			for (const uri of c.details.artifacts) assert.match(uri, /^artifact:\/\/a-[0-9a-f]{16}\/\d+$/);

			// Exactly what Pi does with an extension's compaction (agent-session.js).
			sm.appendCompaction(c.summary, c.firstKeptEntryId, c.tokensBefore, c.details, true);
			const rebuilt = buildSessionContext(sm.getEntries(), sm.getLeafId()).messages;
			const first = rebuilt[0] as any;
			assert.equal(first.role, "compactionSummary", "the context starts with the compaction summary");
			assert.equal(first.summary, c.summary);

			const before = estimate(contextBefore);
			contextBeforeFirst = before;
			const afterTokens = estimate(rebuilt);
			console.log(
				`# ${file}: ${contextBefore.length} → ${rebuilt.length} messages, ~${before} → ~${afterTokens} tokens (chars/4), ` +
					`Pi estimateContextTokens ${estimateContextTokens(contextBefore).tokens} → ${estimateContextTokens(rebuilt).tokens}, ` +
					`Cairn ${c.tokensBefore} → ${c.details.tokens_after} by ${c.details.committed_by}, ${c.details.artifacts.length} artifacts, ${millis} ms`,
			);
			assert.ok(afterTokens < before, `the context shrinks (${before} → ${afterTokens})`);

			const was = pairing(contextBefore);
			const now = pairing(rebuilt);
			assert.deepEqual(now.orphanResults, [], "every tool result follows its call");
			const newlyUnanswered = now.unansweredCalls.filter((id) => !was.unansweredCalls.includes(id));
			assert.deepEqual(newlyUnanswered, [], "every tool call keeps its result");

			// Persisted the way Pi persists: reopen the file and rebuild.
			const reopened = SessionManager.open(copy, dir);
			const saved = reopened.getBranch().at(-1) as CompactionEntry;
			assert.equal(saved.type, "compaction");
			assert.equal(saved.fromHook, true);
			assert.equal((saved.details as any).archive_id, c.details.archive_id);
			assert.equal(reopened.buildSessionContext().messages.length, rebuilt.length);
		});

		test("Pi's prepareCompaction still works on the compacted session, one exchange later", () => {
			assert.ok(result?.compaction, "needs the compaction");
			const now = Date.now();
			sm.appendMessage({ role: "user", content: [{ type: "text", text: "Carry on with the next step." }], timestamp: now } as any);
			sm.appendMessage({
				role: "assistant",
				content: [{ type: "text", text: "Continuing from the summary." }],
				api: "anthropic-messages",
				provider: "anthropic",
				model: "claude-test",
				usage: {
					input: 1000,
					output: 10,
					cacheRead: 0,
					cacheWrite: 0,
					totalTokens: 1010,
					cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
				},
				stopReason: "stop",
				timestamp: now + 1,
			} as any);
			const branch = sm.getBranch();
			let prep: any;
			assert.doesNotThrow(() => {
				prep = prepareCompaction(branch, DEFAULT_COMPACTION_SETTINGS);
			});
			if (prep) {
				assert.ok(branch.some((e) => e.id === prep.firstKeptEntryId), "its firstKeptEntryId is on the branch");
				assert.ok(prep.tokensBefore > 0);
				assert.equal(prep.previousSummary, result.compaction.summary);
			}
			console.log(`# ${file}: prepareCompaction after → ${prep ? `cut at ${prep.firstKeptEntryId}, ${prep.messagesToSummarize.length} to summarize` : "undefined"}`);
		});

		test("session_history finds text that Cairn elided", async () => {
			assert.ok(result?.compaction, "needs the compaction");
			const c = result.compaction;
			// What Cairn saw as context before the kept tail: from the previous compaction's kept
			// entries (if any) up to the new firstKeptEntryId.
			const cut = branchBefore.findIndex((e) => e.id === c.firstKeptEntryId);
			const previous = branchBefore.findLastIndex((e) => e.type === "compaction");
			const start = previous < 0 ? 0 : branchBefore.findIndex((e) => e.id === (branchBefore[previous] as CompactionEntry).firstKeptEntryId);
			const target = elidedLine(branchBefore.slice(Math.max(0, start), cut), branchBefore, c.summary);
			assert.ok(target, "some tool output before the kept tail is not in the summary");
			const tool = loaded.tools.get("session_history");
			assert.ok(tool);
			const run = (params: Record<string, unknown>) =>
				tool.definition.execute("call-1", params, undefined, undefined, ctx) as Promise<{
					content: Array<{ type: string; text: string }>;
					details: any;
				}>;

			const summary = await run({ action: "summary" });
			assert.ok(summary.content[0]!.text.includes(c.details.archive_id), "the summary names the archive");
			// A tool error reaches Pi as the server's message (not the `{error}` JSON around it).
			await assert.rejects(run({ action: "page", archive_id: "a-0000000000000000" }), (error: Error) => {
				assert.doesNotMatch(error.message, /^\{/);
				assert.ok(error.message.length > 0);
				return true;
			});

			const query = target.line.split(/[^A-Za-z0-9_]+/).filter((w) => w.length >= 3).slice(0, 8).join(" ");
			let hit: any;
			let offset: number | undefined = 0;
			for (let pages = 0; pages < 10 && offset !== undefined && !hit; pages++) {
				const found = await run({ action: "search", query, offset, limit: 20 });
				assert.ok(Array.isArray(found.details.hits), `search result has hits: ${found.content[0]!.text.slice(0, 300)}`);
				hit = found.details.hits.find((h: any) => h.entry_id === target.entry.id);
				offset = found.details.next_offset ?? undefined;
			}
			assert.ok(hit, `search "${query}" finds entry ${target.entry.id}`);
			assert.equal(hit.archive_id, c.details.archive_id);

			// And the page gives back the original text.
			const page = await run({ action: "page", archive_id: hit.archive_id, offset: hit.index, limit: 1, char_offset: Math.max(0, hit.char_offset - 200) });
			const slice = page.details.entries?.[0];
			assert.ok(slice, `page returned the entry: ${page.content[0]!.text.slice(0, 300)}`);
			assert.equal(slice.entry_id, target.entry.id);
			assert.ok(slice.text.includes(target.line), "the archived original holds the elided line");
		});

		test("Cairn compacts again: the session grows, a second session_before_compact, Pi appends and rebuilds", async () => {
			assert.ok(result?.compaction, "needs the first compaction");
			const first = result.compaction;
			const sizeAfterFirst = estimate(sm.buildSessionContext().messages);
			const work = recordedToolWork(branchBefore);
			assert.ok(work.length > 0, "the recorded session has tool work to replay");
			// Large again: as large as the context Pi first compacted.
			const grown = growSession(sm, work, contextBeforeFirst);

			const branch = sm.getBranch();
			const contextBefore = buildSessionContext(sm.getEntries(), sm.getLeafId()).messages;
			const before = estimate(contextBefore);
			const preparation = prepareCompaction(branch, DEFAULT_COMPACTION_SETTINGS);
			assert.ok(preparation, "Pi would compact again (prepareCompaction gives a preparation)");
			assert.equal(preparation.previousSummary, first.summary, "Pi sees Cairn's first summary as the previous one");

			const shown = recorded.notices.length;
			const started = Date.now();
			const second = (await handler(loaded, "session_before_compact")(
				{ type: "session_before_compact", preparation, branchEntries: branch, customInstructions: undefined, signal: new AbortController().signal },
				ctx,
			)) as typeof result;
			const millis = Date.now() - started;
			if (!second?.compaction) {
				// Why not: the server's own answer for the same branch (without the transcript).
				// Same conversation, a second server process (the server serializes the two).
				const probe = await ext.CairnServer.start({ bin: ext.cairnBinary(), conversation: ext.conversationKey(sm.getSessionId()), cwd: dir });
				try {
					const transcript = ext.sessionText(sm.getHeader(), branch, { id: sm.getSessionId(), cwd: dir });
					const answer = await probe.call("compact", { conversation: probe.conversation, transcript, include_transcript: false });
					assert.fail(`no second Cairn compaction; notices ${JSON.stringify(recorded.notices.slice(shown))}; compact answers ${JSON.stringify(answer)}`);
				} finally {
					await probe.close();
				}
			}
			const c = second!.compaction;
			assert.ok(!recorded.notices.slice(shown).some((n) => n.message.includes("Pi compacts")), JSON.stringify(recorded.notices.slice(shown)));
			assert.equal(c.details.cairn, true, "the compaction is Cairn's");
			assert.match(c.details.archive_id, /^a-[0-9a-f]{16}$/);
			assert.notEqual(c.details.archive_id, first.details.archive_id, "a new archive");
			assert.ok(branch.some((e) => e.id === c.firstKeptEntryId), "firstKeptEntryId is on the branch");

			// Exactly what Pi does with an extension's compaction, then Pi's rebuild.
			sm.appendCompaction(c.summary, c.firstKeptEntryId, c.tokensBefore, c.details, true);
			const rebuilt = buildSessionContext(sm.getEntries(), sm.getLeafId()).messages;
			const head = rebuilt[0] as any;
			assert.equal(head.role, "compactionSummary", "the context starts with the compaction summary");
			assert.equal(head.summary, c.summary, "… the new one");
			assert.equal(rebuilt.filter((m: any) => m.role === "compactionSummary").length, 1, "one summary (the first is replaced)");
			const afterTokens = estimate(rebuilt);
			console.log(
				`# ${file}: second compaction after ${grown.rounds} rounds (${grown.calls} tool calls): ${contextBefore.length} → ${rebuilt.length} messages, ` +
					`~${before} → ~${afterTokens} tokens (chars/4; ~${sizeAfterFirst} after the first), summary ${first.summary.length} → ${c.summary.length} chars, ` +
					`Cairn ${c.tokensBefore} → ${c.details.tokens_after} by ${c.details.committed_by}, ${c.details.artifacts.length} artifacts, ` +
					`${first.details.archive_id} → ${c.details.archive_id}, ${millis} ms`,
			);
			assert.ok(afterTokens < before, `the context shrinks again (${before} → ${afterTokens})`);

			const was = pairing(contextBefore);
			const now = pairing(rebuilt);
			assert.deepEqual(now.orphanResults, [], "every tool result follows its call");
			assert.deepEqual(
				now.unansweredCalls.filter((id) => !was.unansweredCalls.includes(id)),
				[],
				"every tool call keeps its result",
			);

			// Persisted: reopen the file; both compactions are there, the latest counts.
			const reopened = SessionManager.open(copy, dir);
			const saved = reopened.getBranch().filter((e) => e.type === "compaction") as CompactionEntry[];
			assert.deepEqual(
				saved.slice(-2).map((e) => (e.details as any)?.archive_id),
				[first.details.archive_id, c.details.archive_id],
			);
			assert.equal(reopened.buildSessionContext().messages.length, rebuilt.length);

			// Pi's prepareCompaction still works, one exchange later.
			exchange(sm, "Carry on after the second compaction.");
			const after = sm.getBranch();
			let prep: any;
			assert.doesNotThrow(() => {
				prep = prepareCompaction(after, DEFAULT_COMPACTION_SETTINGS);
			});
			assert.ok(prep, "Pi can prepare a compaction");
			assert.ok(after.some((e) => e.id === prep.firstKeptEntryId), "its firstKeptEntryId is on the branch");
			assert.equal(prep.previousSummary, c.summary);
			assert.ok(prep.tokensBefore > 0);

			// Both archives stay readable for the model.
			const history = await loaded.tools.get("session_history")!.definition.execute("call-2", { action: "summary" }, undefined, undefined, ctx);
			const text = history.content[0].text as string;
			assert.ok(text.includes(c.details.archive_id), "session_history names the new archive");
			assert.ok(text.includes(first.details.archive_id), "… and the first");
		});

		test("turn_end feeds boundary; Pi applies a compaction Cairn commits there (agent_end → compact)", async () => {
			// A fresh copy of the recorded session, under a session id of its own (its own Cairn
			// conversation): Pi has not compacted it with Cairn yet.
			const dir2 = mkdtempSync(path.join(scratch, "boundary-"));
			const [head, ...rest] = readFileSync(path.join(sessionsDir, file), "utf8").split("\n");
			writeFileSync(path.join(dir2, file), [JSON.stringify({ ...JSON.parse(head!), id: randomUUID() }), ...rest].join("\n"));
			const sm2 = SessionManager.open(path.join(dir2, file), dir2);
			const rec: Recorded = { notices: [], compactCalls: 0 };
			const boundaries: any[] = [];
			const off = loaded.events.on("cairn:boundary", (data) => boundaries.push(data));
			try {
				const first = exchange(sm2, "Check the build.");
				await handler(loaded, "turn_end")(
					{ type: "turn_end", turnIndex: 0, message: first.reply, toolResults: [] },
					contextFor(sm2, dir2, rec, first.tokens * 4),
				);
				// The handler returns before Cairn answers: Pi emits turn_end to its listeners
				// (`--mode json` prints it) only after the extension handlers returned.
				assert.equal(boundaries.length, 0, "turn_end does not wait for boundary");
				await settled(loaded);
				assert.equal(boundaries.length, 1, `boundary ran (notices: ${JSON.stringify(rec.notices)})`);
				const out = boundaries[0].result;
				assert.equal(out.action.kind, "none", `a roomy window needs nothing: ${JSON.stringify(out.action)}`);
				assert.equal(out.usage, first.tokens, "the usage Pi reported reaches Cairn");
				assert.equal(boundaries[0].sent.incremental, false, "the first boundary sends the whole branch");
				assert.ok(!rec.notices.some((n) => n.level === "warning" || n.level === "error"), JSON.stringify(rec.notices));

				// A window the context fills to 85%: Cairn's trigger compacts at this boundary.
				const second = exchange(sm2, "Now run the tests.");
				const tight = contextFor(sm2, dir2, rec, Math.ceil(second.tokens / 0.85));
				await handler(loaded, "turn_end")({ type: "turn_end", turnIndex: 0, message: second.reply, toolResults: [] }, tight);
				await settled(loaded);
				const out2 = boundaries[1]?.result;
				assert.ok(out2, "second boundary ran");
				assert.deepEqual(
					[boundaries[1].sent.incremental, boundaries[1].sent.since],
					[true, out.acknowledged],
					"the second boundary sends only the exchange appended after the acknowledged entry",
				);
				console.log(
					`# ${file}: boundary at 85% → ${JSON.stringify(out2.action)}, ` +
						`report ${out2.report ? `${out2.report.tokens_before} → ${out2.report.tokens_after} by ${out2.report.committed_by}` : "none"}, ` +
						`first_kept_entry_id ${JSON.stringify(out2.first_kept_entry_id)}, prefix_summary ${out2.prefix_summary?.length} chars, transcript ${out2.transcript?.length} chars`,
				);
				assert.equal(out2.action.kind, "compacted", `Cairn compacts at 85% (notices: ${JSON.stringify(rec.notices)})`);
				assert.equal(typeof out2.first_kept_entry_id, "string", "boundary returns the kept tail");
				assert.ok(typeof out2.prefix_summary === "string" && out2.prefix_summary.length > 0, "… and the summary before it");
				assert.equal(out2.transcript, "", "no transcript was asked for (include_transcript: false)");
				assert.ok(rec.notices.some((n) => n.message.startsWith("Cairn (compacted)")), "Cairn's notice was shown");

				// agent_end asks Pi to compact; Pi's compaction hook then applies Cairn's compaction.
				await handler(loaded, "agent_end")({ type: "agent_end", messages: [] }, tight);
				await settled(loaded);
				assert.equal(rec.compactCalls, 1, "agent_end asked Pi to compact");
				const branch = sm2.getBranch();
				const contextBefore = sm2.buildSessionContext().messages;
				const preparation = prepareCompaction(branch, DEFAULT_COMPACTION_SETTINGS);
				assert.ok(preparation, "Pi can compact");
				const applied = (await handler(loaded, "session_before_compact")(
					{ type: "session_before_compact", preparation, branchEntries: branch, signal: new AbortController().signal },
					tight,
				)) as typeof result;
				assert.ok(applied?.compaction, `a compaction (notices: ${JSON.stringify(rec.notices)})`);
				const c = applied.compaction;
				assert.equal(c.details.archive_id, out2.report.archive_id, "Pi applies the boundary's compaction (no second `compact`)");
				assert.equal(c.tokensBefore, out2.report.tokens_before);
				sm2.appendCompaction(c.summary, c.firstKeptEntryId, c.tokensBefore, c.details, true);
				const rebuilt = sm2.buildSessionContext().messages;
				assert.equal((rebuilt[0] as any).summary, c.summary);
				assert.ok(estimate(rebuilt) < estimate(contextBefore), `shrinks (${estimate(contextBefore)} → ${estimate(rebuilt)})`);
				assert.deepEqual(pairing(rebuilt).orphanResults, []);
				console.log(`# ${file}: applied the boundary's ${c.details.archive_id}: ~${estimate(contextBefore)} → ~${estimate(rebuilt)} tokens`);
			} finally {
				off();
			}
		});

		test("after Cairn's compaction: the next maintenance, or Pi's own compaction when Cairn cannot", async () => {
			assert.ok(result?.compaction, "needs the compaction");
			const boundaries: any[] = [];
			const off = loaded.events.on("cairn:boundary", (data) => boundaries.push(data));
			try {
				const turn = exchange(sm, "And the next step.");
				const tight = contextFor(sm, dir, recorded, Math.ceil(turn.tokens / 0.85));
				const shown = recorded.notices.length;
				await handler(loaded, "turn_end")({ type: "turn_end", turnIndex: 0, message: turn.reply, toolResults: [] }, tight);
				await settled(loaded);
				const out = boundaries[0]?.result;
				assert.ok(out, "boundary ran");
				const notes = recorded.notices.slice(shown);
				console.log(`# ${file}: boundary at 85% after Cairn's compaction → ${JSON.stringify(out.action)}; notices ${JSON.stringify(notes)}`);
				assert.ok(["compacted", "failed", "paused", "deferred"].includes(out.action.kind), JSON.stringify(out.action));
				if (out.action.kind === "failed") {
					assert.ok(notes.some((n) => n.level === "warning" && n.message.startsWith("Cairn maintenance failed")), "the failure is shown");
				}
				await handler(loaded, "agent_end")({ type: "agent_end", messages: [] }, tight);
				await settled(loaded);
				const branch = sm.getBranch();
				const preparation = prepareCompaction(branch, DEFAULT_COMPACTION_SETTINGS);
				assert.ok(preparation);
				const outcome = (await handler(loaded, "session_before_compact")(
					{ type: "session_before_compact", preparation, branchEntries: branch, signal: new AbortController().signal },
					tight,
				)) as typeof result;
				console.log(
					`# ${file}: then session_before_compact → ${outcome?.compaction ? `Cairn's compaction ${outcome.compaction.details.archive_id}` : "nothing: Pi's own compaction runs"}`,
				);
				if (out.action.kind === "compacted") {
					assert.ok(outcome?.compaction, `the boundary's compaction applies (notices: ${JSON.stringify(recorded.notices.slice(shown))})`);
					assert.equal(outcome.compaction.details.archive_id, out.report.archive_id, "the boundary's compaction, not a second one");
				}
				if (outcome?.compaction) {
					sm.appendCompaction(outcome.compaction.summary, outcome.compaction.firstKeptEntryId, outcome.compaction.tokensBefore, outcome.compaction.details, true);
					assert.equal((sm.buildSessionContext().messages[0] as any).summary, outcome.compaction.summary);
				} else {
					assert.ok(recorded.notices.slice(shown).some((n) => n.message.includes("Pi compacts this time")), "says Pi compacts");
				}
			} finally {
				off();
			}
		});
	});
}
