/**
 * Cairn for OpenCode (1.18.x): when OpenCode compacts a session, Cairn's policy does the
 * compaction and its summary is the one OpenCode keeps.
 *
 * OpenCode runs, in one compaction: `experimental.session.compacting` → a
 * `experimental.chat.messages.transform` over the messages it is about to summarize (its
 * "head"; the kept tail is not in it) → the summarizer's model call → `experimental.text.complete`
 * on the summary's text, whose replacement is what OpenCode saves and sends on later turns.
 * This plugin:
 * 1. `session.compacting`: sends the session (as `opencode export` prints it, which Cairn reads)
 *    to Cairn's `compact` tool. When Cairn commits, the summarizer's prompt is replaced by a
 *    one-word request, since OpenCode gives a plugin no way to skip that model call.
 * 2. `messages.transform` of that compaction: notes the head, then empties it, so the
 *    summarizer's call carries no history.
 * 3. `text.complete` of the summary: replaces it by Cairn's `prefix_summary`, followed by the
 *    messages Cairn keeps verbatim that OpenCode's tail does not keep — whole: from
 *    `first_kept_entry_id` on, Cairn's compacted context is those messages unchanged (what
 *    Cairn itself cut is before it, each cut naming its `artifact://`), so a cut here would
 *    lose text no recall could bring back.
 * `compact` gets OpenCode's own measure: the usage its transcript records (what its provider
 * billed, system prompt and tool schemas included) and the usable window of the model (its
 * context less its output reserve, as OpenCode's overflow check computes it), so Cairn decides
 * on the numbers that made OpenCode compact.
 * When Cairn commits nothing, OpenCode's own summarizer runs; before it does, the session is
 * handed over to Cairn (`handover`: everything archived, so `session_history` finds it), the
 * handover's rendering — the operator's rules first — is appended to OpenCode's summary, and
 * the user is told in a toast. When Cairn fails, the user is told too.
 *
 * The agent's `session_history` is Cairn's MCP server in opencode.json (`mcp.cairn`, written by
 * `cairn opencode install`): this plugin starts the same command with `--expose harness`, so both
 * use one home, policy and conversation. No turn-end `boundary` calls: that server offers
 * `session_history` alone (`--expose recall`), never a `context_maintenance` nothing would carry out.
 *
 * In-process when it can: with the Node package `cairn-compaction` installed where this file can
 * `require` it (`.opencode/node_modules`), `compact` and `handover` run in OpenCode's own process
 * through its Node-API addon, on the home, policy and plugin folders the server's command names —
 * no child, no JSON over a pipe. Otherwise, and with CAIRN_IN_PROCESS=0, that command is started.
 *
 * No dependencies: a minimal MCP client (JSON-RPC lines over the child's stdio) is below.
 * OpenCode calls every function this module exports as a plugin: only `CairnPlugin` is exported.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";

/** The one-word request the summarizer gets once Cairn has compacted (its answer is replaced). */
const SUMMARIZER_PROMPT = "The conversation was already summarized elsewhere. Reply with the single word OK.";
/** A compaction of a very long session on a small machine can take minutes. */
const CALL_TIMEOUT_MS = 10 * 60 * 1000;
/** How long after `session.compacting` its transform is expected (it follows at once). */
const MARK_TTL_MS = 5_000;
/** OpenCode's cap on a model's output reserve (`OUTPUT_TOKEN_MAX`). */
const OUTPUT_TOKEN_MAX = 32_000;

interface Part {
	type: string;
	text?: string;
	synthetic?: boolean;
	ignored?: boolean;
	tool?: string;
	callID?: string;
	state?: { status?: string; input?: unknown; output?: string; error?: string };
}
interface Message {
	info: { id: string; role: string; sessionID?: string; providerID?: string; modelID?: string };
	parts: Part[];
}
/** What `compact` returns; only the fields the plugin reads. */
interface CompactReport {
	committed?: boolean;
	archive_id?: string | null;
	/** Why nothing was committed. */
	not_committed?: string;
	first_kept_entry_id?: string | null;
	prefix_summary?: string | null;
	/** Message and part kinds Cairn's reader did not know. */
	unrecognized?: unknown;
}
/**
 * A compaction Cairn made, waiting for OpenCode's summary to replace; or (`appended`) Cairn's
 * handover after it committed nothing, whose text follows OpenCode's own summary.
 */
interface Pending {
	report: CompactReport;
	messages: Message[];
	appended?: string;
	/** Ids of the messages OpenCode summarizes (its transform hook's input). */
	head?: string[];
	/** The summary message, once its first text completed. */
	messageID?: string;
}

/** `mcp.cairn.command` of the config, `--expose recall` made `--expose harness`. */
function harnessCommand(command: unknown): { argv: string[]; conversation: string } | undefined {
	if (!Array.isArray(command) || !command.every((w) => typeof w === "string")) return undefined;
	const argv = [...(command as string[])];
	const expose = argv.indexOf("--expose");
	if (argv[1] !== "serve" || expose < 0) return undefined;
	argv[expose + 1] = "harness";
	const at = argv.indexOf("--conversation");
	const conversation = at >= 0 ? argv[at + 1] : undefined;
	return conversation ? { argv, conversation } : undefined;
}

/** The messages from `head`'s first entry Cairn keeps on, as text: they leave with the head. */
function summaryText(pending: Pending): string {
	const summary = pending.report.prefix_summary ?? "";
	const head = pending.head ?? [];
	const first = pending.report.first_kept_entry_id?.split("/")[0];
	const from = first ? head.indexOf(first) : -1;
	if (from < 0) return summary;
	const byId = new Map(pending.messages.map((m) => [m.info.id, m]));
	const lines = head.slice(from).flatMap((id) => {
		const m = byId.get(id);
		return m ? renderMessage(m) : [];
	});
	return lines.length ? `${summary}\n\nThe most recent steps, verbatim:\n${lines.join("\n")}` : summary;
}

function renderMessage(m: Message): string[] {
	const out: string[] = [];
	for (const p of m.parts) {
		if (p.type === "text" && p.text && !p.ignored) out.push(`[${m.info.role}] ${p.text}`);
		if (p.type === "tool") {
			out.push(`[tool call ${p.tool}] ${JSON.stringify(p.state?.input ?? {})}`);
			const result = p.state?.status === "error" ? `error: ${p.state.error ?? ""}` : (p.state?.output ?? `(${p.state?.status ?? "no result"})`);
			out.push(`[tool result] ${result}`);
		}
	}
	return out;
}

/**
 * What follows OpenCode's own summary when Cairn committed nothing: the handover's rendering.
 * Why Cairn committed nothing is for the user (log, toast), not for the model.
 */
function appendedText(handover: CompactReport): string {
	return (
		`Cairn archived this whole session before OpenCode summarized it (archive ${handover.archive_id}). ` +
		`What Cairn recorded, the operator's rules first; the session_history tool reads back anything else:\n\n${handover.prefix_summary}`
	);
}

/**
 * The usable window of the model the session's last reply came from, as OpenCode's overflow
 * check computes it: its input limit, else its context, less its output reserve. Undefined
 * when the config does not give the model's limit.
 */
async function usableWindow(client: any, messages: Message[]): Promise<number | undefined> {
	const last = [...messages].reverse().find((m) => m.info.role === "assistant" && m.info.providerID && m.info.modelID);
	if (!last) return undefined;
	const listed = await client.config.providers();
	const provider = (listed?.data?.providers ?? []).find((p: any) => p?.id === last.info.providerID);
	const limit = provider?.models?.[last.info.modelID!]?.limit;
	const context = Number(limit?.input || limit?.context || 0);
	if (!context) return undefined;
	const reserve = Math.min(Number(limit?.output) || OUTPUT_TOKEN_MAX, OUTPUT_TOKEN_MAX);
	return Math.max(0, context - reserve);
}

/** A `cairn serve` child and the JSON-RPC (MCP over stdio) it speaks. */
class CairnServer implements Cairn {
	readonly where = "through `cairn serve`";
	private next = 1;
	private buffer = "";
	private stderr = "";
	private readonly waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();

	private constructor(private readonly child: ChildProcessWithoutNullStreams) {
		child.stdout.setEncoding("utf8");
		child.stdout.on("data", (chunk: string) => this.read(chunk));
		child.stderr.on("data", (chunk: Buffer) => (this.stderr = (this.stderr + chunk.toString("utf8")).slice(-2_000)));
		child.on("exit", (code) => this.failAll(new Error(`cairn serve exited (${code})${this.note()}`)));
		child.on("error", (e) => this.failAll(e));
		// A write to a child that is gone (a wrong path, a crash) must not become an uncaught error in OpenCode.
		child.stdin.on("error", (e) => this.failAll(e));
	}

	static async start(argv: string[], cwd: string): Promise<CairnServer> {
		const server = new CairnServer(spawn(argv[0]!, argv.slice(1), { cwd, stdio: ["pipe", "pipe", "pipe"] }));
		await server.request("initialize", {
			protocolVersion: "2025-06-18",
			capabilities: {},
			clientInfo: { name: "cairn-opencode-plugin", version: "0.1.0" },
		});
		server.child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`);
		return server;
	}

	/** Calls a tool; its structured content, or an error carrying the server's message. */
	async call<T>(tool: string, args: Record<string, unknown>): Promise<T> {
		const result = await this.request("tools/call", { name: tool, arguments: args });
		const text = result?.content?.[0]?.text;
		if (result?.isError) throw new Error(`cairn ${tool}: ${text ?? JSON.stringify(result)}`);
		return (result?.structuredContent ?? JSON.parse(text ?? "{}")) as T;
	}

	close(): void {
		this.child.stdin.end();
		setTimeout(() => this.child.kill("SIGTERM"), 2_000).unref();
	}

	private request(method: string, params: unknown): Promise<any> {
		const id = this.next++;
		return new Promise((resolve, reject) => {
			const timer = setTimeout(() => {
				this.waiting.delete(id);
				reject(new Error(`cairn ${method}: no answer within ${CALL_TIMEOUT_MS / 1000} s`));
			}, CALL_TIMEOUT_MS);
			this.waiting.set(id, {
				resolve: (v) => (clearTimeout(timer), resolve(v)),
				reject: (e) => (clearTimeout(timer), reject(e)),
			});
			this.child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
		});
	}

	private read(chunk: string): void {
		this.buffer += chunk;
		let newline: number;
		while ((newline = this.buffer.indexOf("\n")) >= 0) {
			const line = this.buffer.slice(0, newline).trim();
			this.buffer = this.buffer.slice(newline + 1);
			if (!line) continue;
			let message: any;
			try {
				message = JSON.parse(line);
			} catch {
				continue;
			}
			const waiter = typeof message.id === "number" ? this.waiting.get(message.id) : undefined;
			if (!waiter) continue;
			this.waiting.delete(message.id);
			if (message.error) waiter.reject(new Error(`${message.error.message ?? JSON.stringify(message.error)}${this.note()}`));
			else waiter.resolve(message.result);
		}
	}

	private failAll(error: Error): void {
		for (const waiter of this.waiting.values()) waiter.reject(error);
		this.waiting.clear();
	}

	private note(): string {
		return this.stderr.trim() ? `\n${this.stderr.trim().split("\n").slice(-5).join("\n")}` : "";
	}
}

/** What the plugin asks of Cairn: `cairn serve`'s harness tools, from a child or in-process. */
interface Cairn {
	call<T>(tool: string, args: Record<string, unknown>): Promise<T>;
	close(): void;
	/** Said in the log: where Cairn ran. */
	readonly where: string;
}

/** The part of `cairn-compaction`'s Host the plugin uses. */
interface Host {
	call(operation: string, fields: Record<string, unknown>): Promise<unknown>;
}

/** One host per OpenCode process and options: its plugins are compiled once. */
let hosts: { key: string; host: Host } | undefined;

/**
 * Cairn in this process, or undefined when `cairn-compaction` is not installed (a package that is
 * installed but does not load is an error: silently spawning another binary would hide why).
 * The host opens on what the server's command names: `--home`, `--policy`, `--plugin-dir`.
 */
function inProcess(argv: string[]): Cairn | undefined {
	if (process.env.CAIRN_IN_PROCESS === "0") return undefined;
	const from = createRequire(import.meta.url);
	let resolved: string;
	try {
		resolved = from.resolve("cairn-compaction");
	} catch {
		return undefined;
	}
	const flag = (name: string) => argv.flatMap((word, i) => (word === name && argv[i + 1] !== undefined ? [argv[i + 1]!] : []));
	const options = { home: flag("--home")[0], policy: flag("--policy")[0], pluginDirs: flag("--plugin-dir") };
	const key = JSON.stringify(options);
	if (hosts?.key !== key) hosts = { key, host: new (from(resolved).Host)(options) as Host };
	const host = hosts.host;
	return {
		where: "in-process",
		async call<T>(tool: string, args: Record<string, unknown>): Promise<T> {
			try {
				return (await host.call(tool, args)) as T;
			} catch (error) {
				throw new Error(`cairn ${tool}: ${error instanceof Error ? error.message : String(error)}`);
			}
		},
		close() {},
	};
}

/** Cairn for one compaction: in-process when the package is installed, else the server's command. */
async function open(argv: string[], directory: string): Promise<Cairn> {
	return inProcess(argv) ?? (await CairnServer.start(argv, directory));
}

/** Cairn's MCP server as the config registers it (the merged config, else ./opencode.json). */
async function registered(client: any, directory: string): Promise<unknown> {
	try {
		const config = await client.config.get();
		const command = config?.data?.mcp?.cairn?.command;
		if (command) return command;
	} catch {
		// read the file instead
	}
	for (const file of ["opencode.json", ".opencode/opencode.json"]) {
		try {
			return JSON.parse(readFileSync(path.join(directory, file), "utf8"))?.mcp?.cairn?.command;
		} catch {
			// next
		}
	}
	return undefined;
}

export const CairnPlugin = async ({ client, directory }: { client: any; directory: string }) => {
	const pending = new Map<string, Pending>();
	/**
	 * The session whose compaction's transform comes next (OpenCode gives that hook no session),
	 * and since when: OpenCode runs it right after `session.compacting`, so a mark left by a
	 * compaction that failed in between never empties a later turn's messages.
	 */
	let summarizing: { session: string; since: number } | undefined;

	const log = (level: "info" | "warn", message: string) =>
		client.app?.log?.({ body: { service: "cairn", level, message } })?.catch?.(() => {});
	/** In OpenCode's log, and to the user in a toast (nothing else of OpenCode's UI reaches a plugin). */
	const tell = async (variant: "warning" | "error", message: string) => {
		await log("warn", message);
		try {
			await client.tui?.showToast?.({ body: { title: "Cairn", message, variant, duration: 10_000 } });
		} catch {
			// no UI to show it in (a headless run): the log has it
		}
	};

	return {
		"experimental.session.compacting": async (input: { sessionID: string }, output: { context: string[]; prompt?: string }) => {
			summarizing = undefined;
			pending.delete(input.sessionID);
			let server: Cairn | undefined;
			try {
				const command = harnessCommand(await registered(client, directory));
				if (!command) throw new Error("no Cairn MCP server (`mcp.cairn`) in the config: run `cairn opencode install`");
				const listed = await client.session.messages({ path: { id: input.sessionID } });
				const messages: Message[] = listed?.data ?? [];
				const transcript = JSON.stringify({ info: { id: input.sessionID }, messages });
				const window = await usableWindow(client, messages).catch(() => undefined);
				server = await open(command.argv, directory);
				const report = await server.call<CompactReport>("compact", {
					conversation: command.conversation,
					transcript,
					include_transcript: false,
					// The usage OpenCode's messages record, as its provider billed it.
					usage: "recorded",
					...(window ? { window } : {}),
				});
				if (report.unrecognized) await log("warn", `Cairn did not recognize parts of the session: ${JSON.stringify(report.unrecognized)}`);
				if (report.committed && report.prefix_summary) {
					pending.set(input.sessionID, { report, messages });
					summarizing = { session: input.sessionID, since: Date.now() };
					output.prompt = SUMMARIZER_PROMPT;
					await log("info", `Cairn compacted the session ${server.where} (archive ${report.archive_id})`);
					return;
				}
				// OpenCode's summarizer runs; Cairn takes the whole session first, so recall still finds it.
				const why = report.not_committed ?? "no reason given";
				const handover = await server.call<CompactReport>("handover", { conversation: command.conversation, transcript, include_transcript: false });
				if (!handover.committed || !handover.prefix_summary) {
					throw new Error(`it committed nothing (${why}), nor could it archive the session (${handover.not_committed ?? "no reason given"})`);
				}
				pending.set(input.sessionID, { report: handover, messages, appended: appendedText(handover) });
				summarizing = { session: input.sessionID, since: Date.now() };
				await tell(
					"warning",
					`Cairn committed nothing (${why}; usable window ${window ?? "unknown"} tokens): OpenCode summarizes this time. Cairn archived the session (${handover.archive_id}); its record, the operator's rules first, follows OpenCode's summary.`,
				);
			} catch (error) {
				await tell("error", `Cairn's compaction failed (${error instanceof Error ? error.message : String(error)}); OpenCode summarizes this time and Cairn adds nothing`);
			} finally {
				server?.close();
			}
		},

		"experimental.chat.messages.transform": async (_input: unknown, output: { messages: Message[] }) => {
			const mark = summarizing;
			summarizing = undefined;
			if (!mark || Date.now() - mark.since > MARK_TTL_MS) return;
			const p = pending.get(mark.session);
			if (!p || output.messages.some((m) => m.info.sessionID !== mark.session)) return;
			p.head = output.messages.map((m) => m.info.id);
			// OpenCode's own summarizer needs the history.
			if (p.appended !== undefined) return;
			// Emptied in place: OpenCode ignores a new array.
			output.messages.splice(0, output.messages.length);
		},

		"experimental.text.complete": async (input: { sessionID: string; messageID: string }, output: { text: string }) => {
			const p = pending.get(input.sessionID);
			if (!p || !p.head) return;
			if (p.messageID === undefined) {
				p.messageID = input.messageID;
				output.text = p.appended === undefined ? summaryText(p) : `${output.text}\n\n${p.appended}`;
			} else if (p.messageID === input.messageID) {
				// Cairn's summary is whole in the first text part; OpenCode's own keeps its others.
				if (p.appended === undefined) output.text = "";
			} else {
				pending.delete(input.sessionID);
			}
		},

		event: async ({ event }: { event: { type: string; properties?: { sessionID?: string } } }) => {
			if (event.type === "session.compacted" && event.properties?.sessionID) pending.delete(event.properties.sessionID);
		},
	};
};
