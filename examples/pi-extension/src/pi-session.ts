/**
 * Pi ↔ Cairn mapping: conversation keys, the session text sent to Cairn, Cairn's compaction
 * report turned into Pi's `CompactionResult`, and the usage reported at a turn boundary.
 * Types are Pi 0.73.x's (`@mariozechner/pi-coding-agent`).
 */
import type { Usage } from "@mariozechner/pi-ai";
import type { CompactionEntry, CompactionResult, SessionEntry, SessionHeader } from "@mariozechner/pi-coding-agent";

/** What `compact` (and `boundary`'s `report`) returns; only the fields the extension reads. */
export interface CairnReport {
	tokens_before: number;
	tokens_after: number;
	committed_by: string | null;
	degraded?: boolean;
	archive_id: string | null;
	artifacts: string[];
	first_kept_entry_id: string | null;
	prefix_summary: string | null;
	format?: string;
	[field: string]: unknown;
}

/** What the extension stores in the compaction entry's `details`. */
export interface CairnCompactionDetails {
	cairn: true;
	conversation: string;
	archive_id: string | null;
	artifacts: string[];
	committed_by: string | null;
	tokens_after: number;
}

const KEY_MAX = 64;

/**
 * A Cairn conversation key (1–64 of `a-z 0-9 - _ .`) for a Pi session id (a UUID): `pi-<id>`.
 * Anything else is lowercased, other characters become `-`, and the result is cut to 64.
 */
export function conversationKey(sessionId: string): string {
	const cleaned = sessionId.toLowerCase().replace(/[^a-z0-9._-]/g, "-");
	// A conversation key, not text for the agent.
	const key = `pi-${cleaned}`.slice(0, KEY_MAX);
	return key === "pi-" ? "pi-session" : key;
}

/**
 * The branch as a Pi session file: the header line, then the branch's entries (root to leaf),
 * one JSON object per line — what `cairn` reads as format `pi`.
 */
export function sessionText(header: SessionHeader | null, entries: readonly SessionEntry[], fallback: { id: string; cwd: string }): string {
	const head: SessionHeader = header ?? {
		type: "session",
		version: 3,
		id: fallback.id,
		timestamp: new Date().toISOString(),
		cwd: fallback.cwd,
	};
	const lines = [JSON.stringify(head)];
	for (const entry of entries) lines.push(JSON.stringify(entry));
	return `${lines.join("\n")}\n`;
}

/**
 * The branch entries appended after `acknowledged` (the last entry of the working context Cairn
 * acknowledged at the previous boundary), for an incremental `boundary` call; possibly none.
 * Undefined when the branch must be sent whole: the entry is not on this branch (a rewind, a
 * move in the session tree, another session), or a Pi compaction entry follows it (Pi rewrote
 * the context; Cairn would answer `diverged`).
 */
export function appendedSince(branch: readonly SessionEntry[], acknowledged: string | null | undefined): SessionEntry[] | undefined {
	if (!acknowledged) return undefined;
	const at = branch.findIndex((e) => e.id === acknowledged);
	if (at < 0) return undefined;
	const appended = branch.slice(at + 1);
	if (appended.some((e) => e.type === "compaction")) return undefined;
	return appended;
}

/**
 * Session entries as a Pi fragment (`format: "pi"`, no header): one JSON object per line, each
 * with its `id`; "" for none.
 */
export function fragmentText(entries: readonly SessionEntry[]): string {
	return entries.length === 0 ? "" : `${entries.map((e) => JSON.stringify(e)).join("\n")}\n`;
}

export type Mapped =
	| { ok: true; compaction: CompactionResult<CairnCompactionDetails> }
	| { ok: false; reason: string };

/**
 * Cairn's report → Pi's `{summary, firstKeptEntryId, tokensBefore, details}`, or why Pi should
 * run its own compaction instead.
 *
 * Cairn reads a compacted Pi session the way Pi builds its context: the latest compaction's
 * summary (Cairn entry id = the compaction entry's id), then its kept entries, then the rest.
 * If Cairn keeps that old summary as the first entry of its verbatim tail, Pi cannot: a new
 * compaction replaces the old summary. The old summary then goes at the end of the new one and
 * the new compaction keeps from where the old one did, which is the same context.
 */
export function compactionFromReport(report: CairnReport, branch: readonly SessionEntry[], conversation: string): Mapped {
	if (!report.committed_by) return { ok: false, reason: "Cairn committed nothing" };
	let firstKept = report.first_kept_entry_id;
	if (!firstKept) return { ok: false, reason: "Cairn keeps no verbatim tail (first_kept_entry_id is null)" };
	if (typeof report.prefix_summary !== "string") return { ok: false, reason: "the report has no prefix_summary" };
	let summary = report.prefix_summary;
	const kept = branch.find((e) => e.id === firstKept);
	if (!kept) return { ok: false, reason: `first_kept_entry_id ${firstKept} is not on the branch` };
	if (kept.type === "compaction") {
		const old = kept as CompactionEntry;
		summary = summary.trim() === "" ? old.summary : `${summary}\n\n${old.summary}`;
		firstKept = old.firstKeptEntryId;
		if (!branch.some((e) => e.id === firstKept)) {
			return { ok: false, reason: `the earlier compaction's firstKeptEntryId ${firstKept} is not on the branch` };
		}
	}
	// Pi never starts a kept tail with a tool result (its call would be summarized away): move
	// such results into the summary, after the prefix they belong to.
	let at = branch.findIndex((e) => e.id === firstKept);
	const moved: string[] = [];
	while (at >= 0 && at < branch.length && isToolResult(branch[at]!)) {
		moved.push(`\n[tool result]\n${entryText(branch[at]!)}`);
		at++;
	}
	if (moved.length > 0) {
		const next = branch.slice(at).find((e) => e.type !== "compaction");
		if (!next) return { ok: false, reason: "the kept tail holds only tool results" };
		summary += moved.join("");
		firstKept = next.id;
	}
	if (summary.trim() === "") return { ok: false, reason: "prefix_summary is empty" };
	return {
		ok: true,
		compaction: {
			summary,
			firstKeptEntryId: firstKept,
			tokensBefore: report.tokens_before,
			details: {
				cairn: true,
				conversation,
				archive_id: report.archive_id ?? null,
				artifacts: Array.isArray(report.artifacts) ? report.artifacts : [],
				committed_by: report.committed_by,
				tokens_after: report.tokens_after,
			},
		},
	};
}


function isToolResult(entry: SessionEntry): boolean {
	return entry.type === "message" && entry.message.role === "toolResult";
}

function entryText(entry: SessionEntry): string {
	if (entry.type !== "message") return "";
	const content = (entry.message as { content?: unknown }).content;
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content
		.map((b: { type?: string; text?: string }) => (b.type === "text" && typeof b.text === "string" ? b.text : b.type === "image" ? "[image]" : ""))
		.filter((t) => t !== "")
		.join("\n");
}

/** `boundary`'s `usage` argument. */
export type BoundaryUsage = "counted" | "unknown" | { reported_tokens: number; entries_after: number };

/** Entries Cairn turns into context entries (as its Pi reader does). */
function isContextEntry(entry: SessionEntry): boolean {
	if (entry.type === "custom_message") return true;
	if (entry.type === "branch_summary") return Boolean(entry.summary);
	if (entry.type !== "message") return false;
	const message = entry.message as { role: string; excludeFromContext?: boolean };
	return !(message.role === "bashExecution" && message.excludeFromContext);
}

/**
 * The usage to report at a boundary: the last assistant message's usage (as Pi's
 * `getLastAssistantUsage`: not aborted, not an error), with the number of context entries after
 * it, when it is newer than the latest compaction; else `"counted"` (Cairn counts itself).
 */
export function boundaryUsage(branch: readonly SessionEntry[], contextTokens: (usage: Usage) => number): BoundaryUsage {
	let after = 0;
	for (let i = branch.length - 1; i >= 0; i--) {
		const entry = branch[i]!;
		if (entry.type === "compaction") return "counted"; // usage from before it is stale
		if (entry.type === "message" && entry.message.role === "assistant") {
			const m = entry.message as { stopReason?: string; usage?: Usage };
			if (m.stopReason !== "aborted" && m.stopReason !== "error" && m.usage) {
				const tokens = contextTokens(m.usage);
				if (Number.isFinite(tokens) && tokens > 0) return { reported_tokens: Math.round(tokens), entries_after: after };
			}
		}
		if (isContextEntry(entry)) after++;
	}
	return "counted";
}

/** A turn number that grows along a branch and survives restarts: its assistant messages. */
export function turnNumber(branch: readonly SessionEntry[]): number {
	let n = 0;
	for (const e of branch) if (e.type === "message" && e.message.role === "assistant") n++;
	return n;
}
