/**
 * Cairn in Pi's own process, through the `cairn-compaction` Node package (the host as a Node-API
 * addon) when it is installed beside the extension: no `cairn` binary, no child process, no JSON
 * over a pipe. Every call runs on a libuv worker thread, so Pi's event loop never waits on Cairn.
 *
 * It answers what `cairn serve --expose all --conversation KEY` answers (the same harness API
 * underneath): each tool's structured content, and tool errors as CairnToolError with the
 * library's message, so the extension cannot tell the two apart.
 */
import { createRequire } from "node:module";
import * as path from "node:path";
import { CairnToolError, type CairnConnection, type ToolResult } from "./cairn-server.js";

/** The part of `cairn-compaction`'s `Host` the extension uses (the package ships full types). */
interface Host {
	call(operation: string, fields: Record<string, unknown>): Promise<unknown>;
}

interface CairnPackage {
	Host: new (options: { home?: string; policy?: string; pluginDirs?: string[] }) => Host;
}

/** Where `cairn-compaction` is looked for: from this file, i.e. the extension's node_modules. */
const fromHere = createRequire(import.meta.url);

/**
 * The package, or undefined when it is not installed (then the extension spawns `cairn serve`).
 * A package that is installed but does not load (no build for this platform) is an error: the
 * user asked for it, and silently spawning a different binary would hide why.
 */
export function cairnPackage(): CairnPackage | undefined {
	let resolved: string;
	try {
		resolved = fromHere.resolve("cairn-compaction");
	} catch {
		return undefined;
	}
	return fromHere(resolved) as CairnPackage;
}

export interface InProcessOptions {
	/** The conversation the agent tools act on. */
	conversation: string;
	/** CAIRN_HOME, CAIRN_POLICY and CAIRN_PLUGIN_DIRS are read from here, as `cairn serve` reads them. */
	env: NodeJS.ProcessEnv;
}

/** One host per Pi process, whatever the session: its plugins are compiled once. */
let shared: { key: string; host: Host } | undefined;

function hostFor(pkg: CairnPackage, env: NodeJS.ProcessEnv): Host {
	const options = {
		home: env.CAIRN_HOME || undefined,
		policy: env.CAIRN_POLICY || undefined,
		pluginDirs: (env.CAIRN_PLUGIN_DIRS ?? "").split(path.delimiter).filter((dir) => dir.trim() !== ""),
	};
	const key = JSON.stringify(options);
	if (shared?.key !== key) shared = { key, host: new pkg.Host(options) };
	return shared.host;
}

export class InProcessCairn implements CairnConnection {
	private closed = false;

	private constructor(
		readonly conversation: string,
		private readonly host: Host,
	) {}

	/** The in-process connection, or undefined when `cairn-compaction` is not installed. */
	static open(options: InProcessOptions): InProcessCairn | undefined {
		const pkg = cairnPackage();
		if (!pkg) return undefined;
		try {
			return new InProcessCairn(options.conversation, hostFor(pkg, options.env));
		} catch (error) {
			throw new Error(`could not open Cairn in-process (cairn-compaction): ${error instanceof Error ? error.message : String(error)}`);
		}
	}

	get alive(): boolean {
		return !this.closed;
	}

	async call<T = Record<string, unknown>>(tool: string, args: Record<string, unknown>): Promise<T> {
		try {
			return (await this.host.call(...this.operation(tool, args))) as T;
		} catch (error) {
			throw new CairnToolError(tool, error instanceof Error ? error.message : String(error));
		}
	}

	async callRaw(tool: string, args: Record<string, unknown>): Promise<ToolResult> {
		try {
			const answer = await this.host.call(...this.operation(tool, args));
			return { content: [{ type: "text", text: JSON.stringify(answer) }], structuredContent: answer };
		} catch (error) {
			const message = error instanceof Error ? error.message : String(error);
			return { content: [{ type: "text", text: JSON.stringify({ error: message }) }], structuredContent: { error: message }, isError: true };
		}
	}

	/**
	 * A tool of `cairn serve` as the harness operation under it: the agent tools act on this
	 * session's conversation (a model never names one), the harness tools are the operations.
	 */
	private operation(tool: string, args: Record<string, unknown>): [string, Record<string, unknown>] {
		switch (tool) {
			case "session_history":
				return ["history", { ...args, conversation: this.conversation }];
			case "context_maintenance":
				return ["request", { conversation: this.conversation, kind: args.action, preserve: args.preserve, resume: args.resume }];
			default:
				return [tool, args];
		}
	}

	async close(): Promise<void> {
		this.closed = true;
	}
}
