/**
 * A `cairn serve` child process and the official MCP client (`@modelcontextprotocol/sdk`) that
 * talks to it over stdio. Pi-independent: the extension (index.ts) owns one per Pi session.
 */
import * as path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import type { JsonSchemaType, JsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js";

export interface CairnServerOptions {
	/** The `cairn` binary: `$CAIRN_BIN`, else `cairn` on PATH. */
	bin: string;
	/** The conversation the agent tools act on (`--conversation`). */
	conversation: string;
	/** Working directory of the child (Pi's cwd). */
	cwd?: string;
	/** More arguments after `serve --expose all --conversation KEY`. */
	extraArgs?: string[];
	/** Environment of the child; the whole of `process.env` by default (CAIRN_HOME, CAIRN_LOG, …). */
	env?: NodeJS.ProcessEnv;
}

/** An MCP tool result as the extension reads it. */
export interface ToolResult {
	content: unknown[];
	structuredContent?: unknown;
	isError?: boolean;
}

/**
 * Cairn as the extension talks to it: `cairn serve` over MCP (CairnServer) or the library in
 * this process (InProcessCairn, cairn-in-process.ts). Tools are `cairn serve`'s.
 */
export interface CairnConnection {
	/** The conversation the agent tools act on. */
	readonly conversation: string;
	/** False once it cannot answer any more (the child exited): open another. */
	readonly alive: boolean;
	/** A tool's structured content; a tool error throws CairnToolError. */
	call<T = Record<string, unknown>>(tool: string, args: Record<string, unknown>, options?: { signal?: AbortSignal; timeoutMs?: number }): Promise<T>;
	/** The raw result (the agent tools forward its text to the model). */
	callRaw(tool: string, args: Record<string, unknown>, options?: { signal?: AbortSignal; timeoutMs?: number }): Promise<ToolResult>;
	close(): Promise<void>;
}

/** A tool result with `isError: true`, or one that is not what the contract says. */
export class CairnToolError extends Error {
	constructor(
		readonly tool: string,
		/** The server's message (or why the call failed), without the `cairn TOOL: ` prefix. */
		readonly reason: string,
	) {
		super(`cairn ${tool}: ${reason}`);
		this.name = "CairnToolError";
	}
}

/** `CAIRN_BIN`, else `cairn` (looked up on PATH by the spawn). */
export function cairnBinary(env: NodeJS.ProcessEnv = process.env): string {
	return env.CAIRN_BIN && env.CAIRN_BIN.trim() !== "" ? env.CAIRN_BIN : "cairn";
}

/**
 * Extra `cairn serve` arguments from the environment: `CAIRN_POLICY` (a policy file) and
 * `CAIRN_PLUGIN_DIRS` (plugin directories, separated like PATH). `CAIRN_HOME` and `CAIRN_LOG`
 * need no argument: the child inherits the environment and reads them itself.
 */
export function serveArgsFromEnv(env: NodeJS.ProcessEnv = process.env): string[] {
	const args: string[] = [];
	if (env.CAIRN_POLICY) args.push("--policy", env.CAIRN_POLICY);
	for (const dir of (env.CAIRN_PLUGIN_DIRS ?? "").split(path.delimiter)) {
		if (dir.trim() !== "") args.push("--plugin-dir", dir);
	}
	return args;
}

/** A compaction of a very long session on a small machine can take minutes. */
const DEFAULT_TIMEOUT_MS = 10 * 60 * 1000;
const STDERR_LINES = 40;

export class CairnServer implements CairnConnection {
	private readonly stderrTail: string[] = [];
	/** Each tool's output schema, compiled (from `tools/list` at start). */
	private readonly outputValidators = new Map<string, JsonSchemaValidator<unknown>>();
	/** Ways in which the server's answers differed from the contract (reported once each). */
	readonly deviations = new Set<string>();
	private closed = false;

	private constructor(
		readonly options: CairnServerOptions,
		private readonly client: Client,
		private readonly transport: StdioClientTransport,
	) {}

	/** False once the child exited or the connection closed: start a new one. */
	get alive(): boolean {
		return !this.closed;
	}

	get conversation(): string {
		return this.options.conversation;
	}

	/** Spawns `cairn serve --expose all --conversation KEY …` and runs the MCP handshake. */
	static async start(options: CairnServerOptions): Promise<CairnServer> {
		const args = ["serve", "--expose", "all", "--conversation", options.conversation, ...(options.extraArgs ?? [])];
		const env: Record<string, string> = {};
		for (const [k, v] of Object.entries(options.env ?? process.env)) if (v !== undefined) env[k] = v;
		const transport = new StdioClientTransport({
			command: options.bin,
			args,
			env,
			cwd: options.cwd,
			// Never "inherit": Pi's TUI owns the terminal. Kept for error messages instead.
			stderr: "pipe",
			// The SDK's read limit (10 MB a message) is enough: the extension asks `compact` and
			// `boundary` for no transcript (`include_transcript: false`), and the agent tools'
			// answers are bounded by the server.
		});
		const client = new Client({ name: "cairn-pi-extension", version: "0.1.0" });
		const server = new CairnServer(options, client, transport);
		transport.stderr?.on("data", (chunk: Buffer) => server.keepStderr(chunk.toString("utf8")));
		client.onclose = () => {
			server.closed = true;
		};
		try {
			await client.connect(transport);
			server.killOnExit();
			await server.toolNames(); // compiles the output schemas
		} catch (error) {
			await client.close().catch(() => {});
			await transport.close().catch(() => {});
			throw new Error(`could not start \`${options.bin} ${args.join(" ")}\`: ${describe(error)}${server.stderrNote()}`);
		}
		return server;
	}

	/**
	 * If Pi's process exits while the server still runs (a TUI `process.exit`, a signal), the child
	 * is killed with it rather than left behind. The hook is removed when the server is closed.
	 */
	private killOnExit(): void {
		const pid = this.transport.pid;
		if (pid === null || pid === undefined) return;
		const onExit = () => {
			try {
				process.kill(pid, "SIGTERM");
			} catch {
				// already gone
			}
		};
		process.once("exit", onExit);
		this.removeExitHook = () => process.off("exit", onExit);
	}

	private removeExitHook: () => void = () => {};

	private keepStderr(text: string): void {
		for (const line of text.split("\n")) {
			if (line.trim() === "") continue;
			this.stderrTail.push(line);
			if (this.stderrTail.length > STDERR_LINES) this.stderrTail.shift();
		}
	}

	private stderrNote(): string {
		return this.stderrTail.length ? `\n${this.stderrTail.slice(-5).join("\n")}` : "";
	}

	/** The names of the tools the server lists (and their output schemas, compiled for `call`). */
	async toolNames(): Promise<string[]> {
		const listed = await this.client.listTools();
		const ajv = new AjvJsonSchemaValidator();
		this.outputValidators.clear();
		for (const tool of listed.tools) {
			if (tool.outputSchema) this.outputValidators.set(tool.name, ajv.getValidator(tool.outputSchema as JsonSchemaType));
		}
		return listed.tools.map((t) => t.name);
	}

	/**
	 * Calls a tool and returns its structured content (the contract: `structuredContent`, and the
	 * same object as JSON text in `content[0].text`). An `isError` result throws CairnToolError.
	 */
	async call<T = Record<string, unknown>>(
		tool: string,
		args: Record<string, unknown>,
		options: { signal?: AbortSignal; timeoutMs?: number } = {},
	): Promise<T> {
		const result = await this.callRaw(tool, args, options);
		const text = firstText(result.content);
		if (result.isError) throw new CairnToolError(tool, errorMessage(result));
		const structured = result.structuredContent;
		if (structured && typeof structured === "object") {
			if (text === undefined) this.deviations.add(`${tool}: no content[0].text beside structuredContent`);
			return structured as T;
		}
		this.deviations.add(`${tool}: result without structuredContent`);
		if (text !== undefined) {
			try {
				return JSON.parse(text) as T;
			} catch {
				// fall through
			}
		}
		throw new CairnToolError(tool, "the result carries neither structuredContent nor JSON text");
	}

	/**
	 * The raw MCP result, for callers that forward text (the agent tools). A successful result's
	 * structured content is checked against the tool's output schema.
	 *
	 * This sends `tools/call` itself instead of using `Client.callTool`: the SDK (1.32.2) checks a
	 * result against the output schema even when it is an error (typescript-sdk#1943), so Cairn's
	 * structured errors (`{error}`) would come back as a schema mismatch, with the message lost.
	 */
	async callRaw(
		tool: string,
		args: Record<string, unknown>,
		options: { signal?: AbortSignal; timeoutMs?: number } = {},
	): Promise<ToolResult> {
		let result;
		try {
			result = await this.client.request({ method: "tools/call", params: { name: tool, arguments: args } }, CallToolResultSchema, {
				signal: options.signal,
				timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
				resetTimeoutOnProgress: true,
			});
		} catch (error) {
			throw new CairnToolError(tool, `${describe(error)}${this.stderrNote()}`);
		}
		const out = {
			content: Array.isArray(result.content) ? (result.content as unknown[]) : [],
			structuredContent: result.structuredContent as unknown,
			isError: result.isError === true,
		};
		const validator = this.outputValidators.get(tool);
		if (!out.isError && validator && out.structuredContent !== undefined) {
			const checked = validator(out.structuredContent);
			if (!checked.valid) throw new CairnToolError(tool, `the result does not match the tool's output schema: ${checked.errorMessage}`);
		}
		return out;
	}

	/** Closes stdin and ends the child (the SDK escalates to SIGTERM/SIGKILL if it lingers). */
	async close(): Promise<void> {
		this.closed = true;
		await this.client.close().catch(() => {});
		this.removeExitHook();
	}
}

/**
 * The message of an error result: its structured `error` (the server's), else its text (the
 * `error` field when the text is that JSON object), else the content as JSON.
 */
export function errorMessage(result: { content: unknown[]; structuredContent?: unknown }): string {
	const structured = result.structuredContent as { error?: unknown } | undefined;
	if (structured && typeof structured.error === "string") return structured.error;
	const text = firstText(result.content);
	if (text !== undefined) {
		try {
			const parsed = JSON.parse(text) as { error?: unknown };
			if (parsed && typeof parsed.error === "string") return parsed.error;
		} catch {
			// plain text
		}
		return text;
	}
	return JSON.stringify(result.structuredContent ?? result.content);
}

export function firstText(content: unknown): string | undefined {
	if (!Array.isArray(content)) return undefined;
	const first = content[0] as { type?: string; text?: unknown } | undefined;
	return first && first.type === "text" && typeof first.text === "string" ? first.text : undefined;
}

export function describe(error: unknown): string {
	return error instanceof Error ? error.message : String(error);
}
