/**
 * Cairn for Pi: context compaction in Pi's own process through the `cairn-compaction` package when
 * it is installed beside the extension, else through a `cairn serve` child (MCP over stdio).
 *
 * Pi 0.73.x extension API used (`@mariozechner/pi-coding-agent`):
 * - `ExtensionAPI.on(...)` with `ExtensionHandler<E, R>` for `session_start` (SessionStartEvent),
 *   `session_before_compact` (SessionBeforeCompactEvent → SessionBeforeCompactResult, i.e.
 *   `{ compaction: CompactionResult }`),
 *   `session_compact` (SessionCompactEvent), `turn_end` (TurnEndEvent), `agent_end`
 *   (AgentEndEvent) and `session_shutdown` (SessionShutdownEvent);
 * - `ExtensionAPI.registerTool(ToolDefinition)` for `session_history` and `context_maintenance`;
 * - `ExtensionAPI.sendMessage` (a `cairn` custom message carrying Cairn's advice to the model);
 * - `ExtensionAPI.events` (EventBus): each boundary's result is emitted on `cairn:boundary`
 *   (with how it was sent: whole or incremental, bytes); `cairn:settle` (data: a callback) calls
 *   back once the background work has finished;
 * - `ExtensionContext`: `sessionManager` (ReadonlySessionManager: getSessionId, getHeader,
 *   getBranch), `ui.notify` (ExtensionUIContext), `hasUI`, `cwd`, `model`, `getContextUsage`,
 *   `isIdle`, `hasPendingMessages`, `compact(CompactOptions)`;
 * - `CompactionResult` (what `session_before_compact` returns), `calculateContextTokens`.
 */
import type {
	AgentEndEvent,
	ExtensionAPI,
	ExtensionContext,
	CompactionResult,
	SessionBeforeCompactEvent,
	SessionEntry,
	SessionHeader,
	TurnEndEvent,
} from "@mariozechner/pi-coding-agent";
import { SettingsManager, calculateContextTokens } from "@mariozechner/pi-coding-agent";
import { StringEnum } from "@mariozechner/pi-ai";
import { Type } from "typebox";
import { type CairnConnection, CairnServer, CairnToolError, cairnBinary, describe, errorMessage, firstText, serveArgsFromEnv } from "./cairn-server.js";
import { InProcessCairn } from "./cairn-in-process.js";
import {
	type CairnReport,
	appendedSince,
	boundaryUsage,
	compactionFromReport,
	conversationKey,
	fragmentText,
	sessionText,
	turnNumber,
} from "./pi-session.js";

export { type CairnConnection, CairnServer, CairnToolError, cairnBinary, errorMessage, serveArgsFromEnv } from "./cairn-server.js";
export { InProcessCairn, cairnPackage } from "./cairn-in-process.js";
export * from "./pi-session.js";

/** What `boundary` returns; only the fields the extension reads. */
interface BoundaryResult {
	turn: number;
	action: { kind: string; reason?: string | null };
	advice: string | null;
	usage: number | null;
	report: CairnReport | null;
	notices: string[];
	/** As `compact`'s, when this boundary compacted or handed over (beside `report`, not in it). */
	first_kept_entry_id?: string | null;
	prefix_summary?: string | null;
	/** The last entry of the working context after this boundary: the next call's `since` (null: send whole). */
	acknowledged?: string | null;
}

/** How a boundary was sent (on `cairn:boundary` as `sent`). */
export interface BoundarySent {
	/** Only the entries appended after `since` (`format: "pi"`), not the whole branch. */
	incremental: boolean;
	/** UTF-8 bytes of the `transcript` argument of the call that answered. */
	bytes: number;
	/** The acknowledged entry the fragment follows; null when sent whole. */
	since: string | null;
	/** An incremental call was refused as `diverged: …`, and this boundary was sent again whole. */
	resent_after_diverged: boolean;
}

/** Counts since the current server started (on `cairn:boundary` as `totals`). */
export interface BoundaryTotals {
	/** Boundaries answered. */
	boundaries: number;
	/** Of those, answered to an incremental call. */
	incremental: number;
	/** UTF-8 bytes of every `transcript` sent to `boundary`, the refused calls' included. */
	bytes: number;
	/** Incremental calls refused as `diverged` (each then sent whole once). */
	diverged: number;
}

/** What `cairn:boundary` carries. */
export interface BoundaryEvent {
	conversation: string;
	result: BoundaryResult;
	sent: BoundarySent;
	totals: BoundaryTotals;
}

/** The server of this session and what it acknowledged last: where the next boundary may start. */
interface Link {
	server: CairnConnection;
	/** The last entry of the working context it acknowledged; undefined: the next boundary is sent whole. */
	acknowledged: string | undefined;
	/** +1 at each reset (a compaction): an answer to a call made before it acknowledges nothing. */
	resets: number;
	totals: BoundaryTotals;
}

/** A turn boundary as Pi's session stood at turn_end (entries are immutable); sent later. */
interface TurnSnapshot {
	/** `boundary`'s arguments but the conversation and the transcript (`transcript`, `since`, `format`). */
	args: Record<string, unknown>;
	branch: SessionEntry[];
	header: SessionHeader | null;
	fallback: { id: string; cwd: string };
}

interface Notice {
	id: string;
	kind: string;
	text: string;
	at?: string;
}

/** A compaction Cairn committed at a boundary, waiting for Pi to apply it. */
interface Pending {
	conversation: string;
	report: CairnReport;
}

export interface CairnPiOptions {
	/** Environment read for CAIRN_BIN, CAIRN_POLICY, CAIRN_PLUGIN_DIRS, CAIRN_WINDOW, CAIRN_RESERVE. */
	env?: NodeJS.ProcessEnv;
	/** Apply a compaction Cairn committed at a boundary through `ctx.compact()` (default true). */
	applyBoundaryCompactions?: boolean;
}

const DEFAULT_WINDOW = 128_000;
const DEFAULT_RESERVE = 16_384; // Pi's DEFAULT_COMPACTION_SETTINGS.reserveTokens

function numberFrom(value: string | undefined): number | undefined {
	if (!value) return undefined;
	const n = Number(value);
	return Number.isFinite(n) && n > 0 ? Math.floor(n) : undefined;
}

function noticeLevel(kind: string): "info" | "warning" | "error" {
	if (kind === "policy" || kind.includes("fail") || kind.includes("refus")) return "warning";
	if (kind.includes("pause")) return "warning";
	return "info";
}

/** Builds the extension; `export default` below is what Pi loads. */
export function createCairnExtension(options: CairnPiOptions = {}) {
	const env = options.env ?? process.env;
	const applyAtBoundary = options.applyBoundaryCompactions ?? true;

	return function cairnExtension(pi: ExtensionAPI): void {
		let server: Promise<CairnConnection> | undefined;
		let serverKey: string | undefined;
		let pending: Pending | undefined;
		let compacting = false;
		let lastWarning: string | undefined;
		/** The server's last `acknowledged` (incremental boundaries); reset whenever the server changes. */
		let link: Link | undefined;
		// Shutdown. In print and JSON mode (`pi -p`, `--mode json`) Pi emits `session_shutdown` as
		// soon as the prompt returns, while its queue of agent events (turn_end, agent_end, and the
		// automatic compaction Pi checks after agent_end) may still be running; once the shutdown
		// handlers return, every ctx is stale. So the shutdown handler first lets that work finish
		// (with a live ctx and the server still up), then stops the server. `closed` stays set
		// until the next session_start: no handler starts a server after shutdown.
		let closing = false;
		let closed = false;
		let inFlight = 0;
		/** An agent run between agent_start and the end of agent_end's work (background included). */
		let agentRunning = false;
		/** Agent runs started (agent_start), so that a run's late agent_end work does not end the next one. */
		let agentRuns = 0;
		/** Until when Pi is expected to start a compaction (after agent_end over its threshold, or ctx.compact()). */
		let compactionDueUntil = 0;

		// Background work. Pi emits an agent event to its listeners (`--mode json` prints it) only
		// after every extension handler for it returned, and print mode stops listening as soon as
		// the prompt returns. So turn_end and agent_end return at once and do their Cairn work in
		// the background: `boundaries` chains the boundary calls in turn order; `background` holds
		// every piece of work still running. session_before_compact awaits the boundaries first (a
		// compaction committed there is the one to apply); session_shutdown waits for all of it.
		let boundaries: Promise<void> = Promise.resolve();
		const background = new Set<Promise<void>>();

		/** Runs a handler body, counted so that shutdown waits for it. */
		async function tracked<T>(body: () => Promise<T>): Promise<T> {
			inFlight++;
			try {
				return await body();
			} finally {
				inFlight--;
			}
		}

		/** Starts `body` without waiting for it; counted (shutdown waits) and never rejecting. */
		function inBackground(body: () => Promise<void>): Promise<void> {
			const work = tracked(body).catch(() => {});
			background.add(work);
			void work.finally(() => background.delete(work));
			return work;
		}

		/** Resolves once no background work is left (including work that work started). */
		async function settled(): Promise<void> {
			while (background.size > 0) await Promise.all([...background]);
		}

		/** The server for the current Pi session (restarted when the session id changes). */
		async function serverFor(ctx: ExtensionContext): Promise<CairnConnection> {
			if (closed) throw new Error("Pi has shut this session down; no Cairn server is started any more");
			const key = conversationKey(ctx.sessionManager.getSessionId());
			if (server && serverKey === key) {
				const current = server;
				let running: CairnConnection;
				try {
					running = await current;
				} catch (error) {
					if (server === current) server = undefined; // retry on the next call
					throw error;
				}
				if (running.alive) return running;
				if (server === current) server = undefined; // the child exited: start another
				return serverFor(ctx);
			}
			const old = server;
			serverKey = key;
			pending = undefined;
			link = undefined;
			server = connect(key, ctx.cwd, env);
			if (old) void old.then((s) => s.close()).catch(() => {});
			const started = server;
			try {
				const s = await started;
				lastWarning = undefined;
				return s;
			} catch (error) {
				if (server === started) server = undefined;
				throw error;
			}
		}

		/** Reports a failure once per distinct message (a missing binary must not flood the UI). */
		function warn(ctx: ExtensionContext, message: string, level: "warning" | "error" = "warning"): void {
			if (message === lastWarning) return;
			lastWarning = message;
			notify(ctx, `Cairn: ${message}`, level);
		}

		async function closeServer(): Promise<void> {
			const s = server;
			server = undefined;
			serverKey = undefined;
			pending = undefined;
			link = undefined;
			if (s) await s.then((x) => x.close()).catch(() => {});
		}

		/** True while Pi still has work queued for this session that needs the ctx or the server. */
		function busy(): boolean {
			return inFlight > 0 || agentRunning || compacting || Date.now() < compactionDueUntil;
		}

		/**
		 * Waits until the session is quiet: no handler of ours running, no agent run whose agent_end
		 * is still queued, no compaction Pi is about to start. Bounded (DRAIN_LIMIT_MS), and a
		 * compaction that is running is waited for (its `compact` call has its own timeout).
		 */
		async function drain(): Promise<void> {
			const started = Date.now();
			let quiet = 0;
			while (quiet < 2) {
				const compactionRunning = compacting || inFlight > 0;
				if (!compactionRunning && Date.now() - started > DRAIN_LIMIT_MS) return;
				await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS));
				quiet = busy() ? 0 : quiet + 1;
			}
		}

		function transcriptOf(ctx: ExtensionContext, entries: readonly SessionEntry[]): string {
			return sessionText(ctx.sessionManager.getHeader(), entries, { id: ctx.sessionManager.getSessionId(), cwd: ctx.cwd });
		}

		/** Takes Cairn's notices, shows them, and acknowledges those shown. */
		async function showNotices(ctx: ExtensionContext, cairn: CairnConnection): Promise<Notice[]> {
			const taken = await cairn.call<{ notices: Notice[] }>("notices_take", { conversation: cairn.conversation });
			const notices = Array.isArray(taken.notices) ? taken.notices : [];
			if (notices.length === 0 || !ctx.hasUI) return notices; // kept owed until a UI shows them
			for (const n of notices) ctx.ui.notify(`Cairn (${n.kind}): ${n.text}`, noticeLevel(n.kind));
			await cairn.call("notices_ack", { conversation: cairn.conversation, ids: notices.map((n) => n.id) });
			return notices;
		}

		// For tests and other extensions: `pi.events.emit("cairn:settle", done)` calls `done()` once
		// the work of the turn_end and agent_end handlers so far has finished.
		pi.events.on("cairn:settle", (done) => {
			if (typeof done === "function") void settled().then(() => (done as () => void)());
		});

		pi.on("session_start", async () => {
			// The server starts lazily, on the first call that needs it.
			pending = undefined;
			link = undefined;
			closing = false;
			closed = false;
			agentRunning = false;
			compactionDueUntil = 0;
		});

		pi.on("session_shutdown", async () => {
			if (!closing) {
				closing = true;
				await drain();
			}
			closed = true;
			await closeServer();
		});

		pi.on("agent_start", async () => {
			agentRuns++;
			agentRunning = true;
		});

		pi.on(
			"session_before_compact",
			async (
				event: SessionBeforeCompactEvent,
				ctx: ExtensionContext,
			): Promise<{ compaction: CompactionResult } | { cancel: true } | undefined> => {
				// A handler Pi runs after the session was shut down (print mode: an automatic
				// compaction queued behind agent_end) has a stale ctx and no server. Cancel: Pi's own
				// summarization must not replace Cairn's; the next prompt of this session (`pi -c`)
				// checks the threshold again, with a live session.
				if (closed || !isLive(ctx)) return { cancel: true };
				compacting = true;
				compactionDueUntil = 0;
				try {
					// The boundaries of the turns so far first: one may have committed the compaction.
					await boundaries;
					if (event.signal.aborted) return { cancel: true }; // aborted while it waited
					const cairn = await serverFor(ctx);
					// A compaction Cairn already committed at a boundary: apply it (its archive is
					// already written), do not compact twice. Only when it does not fit the branch
					// Pi hands over (the user moved elsewhere in the tree) does Cairn compact anew.
					if (pending && pending.conversation === cairn.conversation) {
						const mapped = compactionFromReport(pending.report, event.branchEntries, cairn.conversation);
						pending = undefined;
						if (mapped.ok) return { compaction: mapped.compaction };
						notify(ctx, `Cairn: the compaction made at the turn boundary does not apply (${mapped.reason}); compacting again`, "info");
					}
					const args: Record<string, unknown> = {
						conversation: cairn.conversation,
						transcript: transcriptOf(ctx, event.branchEntries),
						// Pi needs first_kept_entry_id + prefix_summary only, not the compacted context.
						include_transcript: false,
					};
					if (event.customInstructions) args.preserve = event.customInstructions;
					// `compact` rewrites the record and acknowledges nothing: the next boundary goes whole.
					forgetAcknowledged();
					const report = await cairn.call<CairnReport>("compact", args, { signal: event.signal });
					const mapped = compactionFromReport(report, event.branchEntries, cairn.conversation);
					if (!mapped.ok) {
						notify(ctx, `Cairn: ${mapped.reason}; Pi compacts this time`, "info");
						return undefined; // Pi's own compaction runs
					}
					return { compaction: mapped.compaction };
				} catch (error) {
					if (!event.signal.aborted) warn(ctx, `compaction failed (${describe(error)}); Pi compacts this time`);
					return undefined;
				} finally {
					compacting = false;
				}
			},
		);

		pi.on("session_compact", async () => {
			pending = undefined;
			compactionDueUntil = 0;
			// Pi wrote its compaction entry: the context Cairn acknowledged is not Pi's any more.
			forgetAcknowledged();
		});

		function forgetAcknowledged(): void {
			if (link) {
				link.acknowledged = undefined;
				link.resets++;
			}
		}

		pi.on("turn_end", async (event: TurnEndEvent, ctx: ExtensionContext) => {
			if (closed || !isLive(ctx)) return; // queued behind the shutdown: nothing to report to
			// The boundary as of this turn, taken now: the session goes on while the call runs. The
			// transcript is written when the call is made: by then the previous boundary answered,
			// and its `acknowledged` says where this one may start.
			let turn: TurnSnapshot;
			try {
				turn = boundarySnapshot(event, ctx);
			} catch (error) {
				warn(ctx, `turn boundary failed: ${describe(error)}`);
				return;
			}
			const previous = boundaries;
			boundaries = inBackground(async () => {
				await previous;
				if (closed || !isLive(ctx)) return;
				await turnEnd(turn, ctx);
			});
		});

		/** This turn's boundary: the branch and `boundary`'s arguments but the transcript. */
		function boundarySnapshot(event: TurnEndEvent, ctx: ExtensionContext): TurnSnapshot {
			const branch = ctx.sessionManager.getBranch();
			const message = event.message as { role?: string; stopReason?: string };
			const window =
				ctx.model?.contextWindow ?? ctx.getContextUsage()?.contextWindow ?? numberFrom(env.CAIRN_WINDOW) ?? DEFAULT_WINDOW;
			const args = {
				turn: turnNumber(branch),
				window,
				reserve: numberFrom(env.CAIRN_RESERVE) ?? DEFAULT_RESERVE,
				usage: boundaryUsage(branch, calculateContextTokens),
				// The agent goes on after a reply that asked for tools; its results are in by turn_end.
				turn_complete: message.role !== "assistant" || message.stopReason !== "toolUse",
				tool_call_outstanding: false,
				// Pi holds the context itself; a compaction comes back as first_kept_entry_id + prefix_summary.
				include_transcript: false,
			};
			const header = ctx.sessionManager.getHeader();
			return { args, branch, header, fallback: { id: ctx.sessionManager.getSessionId(), cwd: ctx.cwd } };
		}

		/**
		 * Calls `boundary`: only the entries appended since the entry this server acknowledged last
		 * when that entry is on the branch, else the whole branch. A fragment the server refuses as
		 * `diverged` (its record is not the history acknowledged) is sent again whole, once.
		 */
		async function sendBoundary(cairn: CairnConnection, turn: TurnSnapshot): Promise<{ result: BoundaryResult; sent: BoundarySent; totals: BoundaryTotals }> {
			if (!link || link.server !== cairn) {
				link = { server: cairn, acknowledged: undefined, resets: 0, totals: { boundaries: 0, incremental: 0, bytes: 0, diverged: 0 } };
			}
			const current = link;
			const resets = current.resets;
			const args = { ...turn.args, conversation: cairn.conversation };
			const since = current.acknowledged;
			const appended = appendedSince(turn.branch, since);
			// Until an answer names the next one: a call that fails leaves the next boundary whole.
			current.acknowledged = undefined;
			const answered = (result: BoundaryResult, sent: BoundarySent) => {
				current.totals.boundaries++;
				if (sent.incremental) current.totals.incremental++;
				if (link === current && current.resets === resets) {
					current.acknowledged = typeof result.acknowledged === "string" ? result.acknowledged : undefined;
				}
				return { result, sent, totals: { ...current.totals } };
			};
			let resent = false;
			if (since !== undefined && appended) {
				const transcript = fragmentText(appended);
				const bytes = Buffer.byteLength(transcript, "utf8");
				current.totals.bytes += bytes;
				try {
					const result = await cairn.call<BoundaryResult>("boundary", { ...args, transcript, since, format: "pi" });
					return answered(result, { incremental: true, bytes, since, resent_after_diverged: false });
				} catch (error) {
					if (!(error instanceof CairnToolError && error.reason.startsWith("diverged:"))) throw error;
					current.totals.diverged++;
					resent = true;
				}
			}
			const transcript = sessionText(turn.header, turn.branch, turn.fallback);
			const bytes = Buffer.byteLength(transcript, "utf8");
			current.totals.bytes += bytes;
			const result = await cairn.call<BoundaryResult>("boundary", { ...args, transcript });
			return answered(result, { incremental: false, bytes, since: null, resent_after_diverged: resent });
		}

		async function turnEnd(turn: TurnSnapshot, ctx: ExtensionContext): Promise<void> {
			try {
				const cairn = await serverFor(ctx);
				const { result, sent, totals } = await sendBoundary(cairn, turn);
				const emitted: BoundaryEvent = { conversation: cairn.conversation, result, sent, totals };
				pi.events.emit("cairn:boundary", emitted);
				const kind = result.action?.kind;
				if (kind === "compacted" && result.report) {
					// Pi applies it at agent_end (compaction hook), from the kept tail and summary the
					// boundary returned beside its report.
					pending = { conversation: cairn.conversation, report: boundaryReport(result, result.report) };
				} else if (kind === "failed" || kind === "paused") {
					const why = result.action.reason ?? stepsSummary(result.report);
					notify(ctx, `Cairn maintenance ${kind}${why ? `: ${why}` : ""}`, "warning");
				} else if (kind === "handed-over") {
					notify(ctx, "Cairn prepared a handover: start a fresh session (/new) to continue from its seed", "info");
				}
				if (result.advice) {
					pi.sendMessage({ customType: "cairn", content: result.advice, display: true }, { deliverAs: "nextTurn" });
				}
				await showNotices(ctx, cairn);
			} catch (error) {
				warn(ctx, `turn boundary failed: ${describe(error)}`);
			}
		}

		pi.on("agent_end", async (event: AgentEndEvent, ctx: ExtensionContext) => {
			const run = agentRuns;
			const ended = () => {
				if (agentRuns === run) agentRunning = false;
			};
			let later = false;
			try {
				if (closed || !isLive(ctx)) return;
				// Pi compacts by itself after agent_end when the last reply is over its threshold;
				// the compaction hook then applies a pending report (or asks Cairn to compact).
				const last = [...event.messages].reverse().find((m) => m.role === "assistant") as
					| { usage?: Parameters<typeof calculateContextTokens>[0]; stopReason?: string }
					| undefined;
				const piCompacts = piWillCompact(ctx, last);
				if (piCompacts !== "no") compactionDueUntil = Date.now() + (piCompacts === "yes" ? COMPACTION_DUE_MS : COMPACTION_MAYBE_MS);
				if (!applyAtBoundary || piCompacts === "yes") return;
				// Otherwise, once the boundaries are in, ask Pi to compact when a compaction is pending.
				const after = boundaries;
				later = true;
				inBackground(async () => {
					try {
						await after;
						// Let Pi finish agent_end (its own compaction check) first.
						await new Promise((resolve) => setTimeout(resolve, 0));
						applyPending(ctx);
					} finally {
						ended();
					}
				});
			} finally {
				if (!later) ended();
			}
		});

		/** Asks Pi to compact, when Cairn committed a compaction at a boundary and Pi is idle. */
		function applyPending(ctx: ExtensionContext): void {
			const expected = pending;
			if (!expected || closed || compacting) return;
			try {
				if (!isLive(ctx) || !ctx.isIdle() || ctx.hasPendingMessages()) return; // the hook applies it later
				compactionDueUntil = Date.now() + COMPACTION_DUE_MS;
				ctx.compact({
					onComplete: () => {
						compactionDueUntil = 0;
					},
					onError: (error) => {
						compactionDueUntil = 0;
						if (pending === expected) pending = undefined;
						warn(ctx, `could not apply Cairn's compaction: ${error.message}`);
					},
				});
			} catch {
				compactionDueUntil = 0;
				pending = undefined; // a stale ctx after a session switch
			}
		}

		/**
		 * Whether Pi starts its automatic compaction after this agent_end: its own check
		 * (`shouldCompact` on the last reply's usage, with the compaction settings it reads), or
		 * "maybe" when the reply failed (Pi then estimates).
		 */
		function piWillCompact(
			ctx: ExtensionContext,
			last: { usage?: Parameters<typeof calculateContextTokens>[0]; stopReason?: string } | undefined,
		): "yes" | "no" | "maybe" {
			if (!last || last.stopReason === "aborted") return "no";
			const settings = compactionSettings(ctx);
			if (!settings.enabled) return "no";
			if (last.stopReason === "error") return "maybe";
			const window = ctx.model?.contextWindow ?? 0;
			if (!last.usage || window <= 0) return "no";
			return calculateContextTokens(last.usage) > window - settings.reserveTokens ? "yes" : "no";
		}

		/** Pi's compaction settings (global and project settings.json), else the environment's reserve. */
		function compactionSettings(ctx: ExtensionContext): { enabled: boolean; reserveTokens: number } {
			const fallback = { enabled: true, reserveTokens: numberFrom(env.CAIRN_RESERVE) ?? DEFAULT_RESERVE };
			try {
				const settings = SettingsManager.create(ctx.cwd).getCompactionSettings();
				return { enabled: settings.enabled !== false, reserveTokens: settings.reserveTokens ?? fallback.reserveTokens };
			} catch {
				return fallback;
			}
		}

		pi.registerTool({
			name: "session_history",
			label: "Session history",
			description:
				"Look back into parts of this conversation that were compacted away. `summary` lists what was set aside; " +
				"`search` finds archived entries by keywords; `page` reads an archive's entries in slices; `artifact` resolves " +
				"an artifact:// URI from a placeholder. Results are bounded; follow next_offset / next_char_offset to read on.",
			promptSnippet: "session_history: read what context compaction set aside (search, page, artifacts)",
			parameters: Type.Object({
				action: StringEnum(["summary", "search", "page", "artifact"] as const),
				query: Type.Optional(Type.String({ description: "search: keywords" })),
				archive_id: Type.Optional(Type.String({ description: "page: which archive (a-…)" })),
				uri: Type.Optional(Type.String({ description: "artifact: the artifact:// URI from a placeholder" })),
				offset: Type.Optional(Type.Integer({ minimum: 0, description: "search, page: first hit or entry" })),
				limit: Type.Optional(Type.Integer({ minimum: 1 })),
				char_offset: Type.Optional(Type.Integer({ minimum: 0, description: "page, artifact: continue a long text" })),
			}),
			async execute(_toolCallId, params, signal, _onUpdate, ctx) {
				return forward(await serverFor(ctx), "session_history", params, signal);
			},
		});

		pi.registerTool({
			name: "context_maintenance",
			label: "Context maintenance",
			description:
				"Ask for context maintenance: `compact` (older history is condensed, originals stay readable through " +
				"session_history) or `handover` (a fresh session continues from a seed). Say what must survive (`preserve`) " +
				"and how to continue (`resume`). It runs at the next safe boundary after this turn; finish the turn at a " +
				"coherent checkpoint.",
			parameters: Type.Object({
				action: StringEnum(["compact", "handover"] as const),
				preserve: Type.String({ description: "what must survive the maintenance" }),
				resume: Type.String({ description: "how to continue afterwards" }),
			}),
			async execute(_toolCallId, params, signal, _onUpdate, ctx) {
				return forward(await serverFor(ctx), "context_maintenance", params, signal);
			},
		});
	};
}

/** How long shutdown waits for queued agent events at most (a running compaction is always waited for). */
const DRAIN_LIMIT_MS = 30_000;
const DRAIN_POLL_MS = 25;
/**
 * Cairn for one Pi session: in this process when the `cairn-compaction` package is installed
 * beside the extension (and CAIRN_IN_PROCESS is not 0), else a `cairn serve` child.
 */
async function connect(conversation: string, cwd: string, env: NodeJS.ProcessEnv): Promise<CairnConnection> {
	if (env.CAIRN_IN_PROCESS !== "0") {
		const inProcess = InProcessCairn.open({ conversation, env });
		if (inProcess) return inProcess;
	}
	return CairnServer.start({ bin: cairnBinary(env), conversation, cwd, extraArgs: serveArgsFromEnv(env), env });
}

/** How long after agent_end a compaction Pi should start is waited for. */
const COMPACTION_DUE_MS = 5_000;
const COMPACTION_MAYBE_MS = 500;

/** False once Pi invalidated the ctx (after session_shutdown or a session replacement). */
function isLive(ctx: ExtensionContext): boolean {
	try {
		void ctx.sessionManager;
		return true;
	} catch {
		return false;
	}
}

/** `ctx.ui.notify`, unless the ctx is stale (never an error from a late handler). */
function notify(ctx: ExtensionContext, message: string, level: "info" | "warning" | "error"): void {
	try {
		if (isLive(ctx)) ctx.ui.notify(message, level);
	} catch {
		// no UI any more
	}
}

/** The boundary's report with the kept tail and summary it returned beside it. */
function boundaryReport(result: BoundaryResult, report: CairnReport): CairnReport {
	return {
		...report,
		first_kept_entry_id: result.first_kept_entry_id ?? report.first_kept_entry_id ?? null,
		prefix_summary: result.prefix_summary ?? report.prefix_summary ?? null,
	};
}

/** "plugin: outcome (message)" for each step of a report, for a notice. */
function stepsSummary(report: CairnReport | null | undefined): string {
	const steps = Array.isArray(report?.steps) ? (report.steps as Array<{ plugin?: string; outcome?: string; message?: string }>) : [];
	return steps.map((s) => `${s.plugin}: ${s.outcome}${s.message ? ` (${s.message})` : ""}`).join("; ");
}

/** Forwards an agent tool call; the model gets the server's text, Pi's details the object. */
async function forward(cairn: CairnConnection, tool: string, params: Record<string, unknown>, signal: AbortSignal | undefined) {
	const args: Record<string, unknown> = {};
	for (const [k, v] of Object.entries(params)) if (v !== undefined) args[k] = v;
	const result = await cairn.callRaw(tool, args, { signal });
	if (result.isError) throw new Error(errorMessage(result));
	const text = firstText(result.content) ?? JSON.stringify(result.structuredContent ?? {});
	return {
		content: [{ type: "text" as const, text }],
		details: (result.structuredContent ?? {}) as Record<string, unknown>,
	};
}

export default createCairnExtension();
