// Types of the `cairn-compaction` package's JavaScript API (index.js). The addon's own types,
// generated from the Rust side by `napi build`, are in native.d.ts.

/** A transcript in any format Cairn reads: OpenAI chat messages, an Anthropic Messages body,
 * or the text of a session file. Answers carry it back in the shape sent. */
export type Messages = string | Array<Record<string, unknown>> | Record<string, unknown>;

export interface HostOptions {
  /** Default: $CAIRN_HOME, else ~/.local/share/cairn; a postgres:// URL is a PostgreSQL record. */
  home?: string;
  /** A TOML policy file; the embedded default when absent. */
  policy?: string;
  /** Folders of plugins beside the bundled ones. */
  pluginDirs?: string[];
}

/** An answer of the harness API: its fields are those of `cairn serve`'s tools. */
export interface Answer<T extends Messages | undefined = Messages> {
  [field: string]: unknown;
  /** The context after the call, in the shape sent (absent when nothing changed it). */
  transcript?: T extends string ? string : T;
}

export interface CompactOptions {
  window?: number;
  budget?: number;
  preserve?: string;
  resume?: string;
  dryRun?: boolean;
}

export interface BoundaryOptions {
  turn: number;
  window: number;
  reserve?: number;
  /** The previous answer's `acknowledged`: `messages` then holds only what was appended since. */
  since?: string;
  format?: string;
  usage?: Record<string, unknown>;
  toolCallOutstanding?: boolean;
  turnComplete?: boolean;
  dryRun?: boolean;
  includeTranscript?: boolean;
}

export class Host {
  constructor(options?: HostOptions);
  call(operation: string, request: Record<string, unknown>): Promise<Record<string, unknown>>;
  compact<T extends Messages>(conversation: string, messages: T, options?: CompactOptions): Promise<Answer<T>>;
  handover<T extends Messages>(conversation: string, messages: T, options?: { preserve?: string; resume?: string }): Promise<Answer<T>>;
  boundary<T extends Messages>(conversation: string, messages: T, options: BoundaryOptions): Promise<Answer<T>>;
  history(conversation: string, action?: 'summary' | 'search' | 'page' | 'artifact', fields?: Record<string, unknown>): Promise<Record<string, unknown>>;
  show(conversation: string, archiveId?: string): Promise<Record<string, unknown>>;
  undo<T extends Messages>(conversation: string, options?: { archiveId?: string; messages?: T }): Promise<Answer<T>>;
  pin(conversation: string, ids: string[]): Promise<string[]>;
  unpin(conversation: string, ids: string[]): Promise<string[]>;
  notices(conversation: string): Promise<Array<Record<string, unknown>>>;
  acknowledge(conversation: string, ids: string[]): Promise<number>;
  request(conversation: string, kind: 'compact' | 'handover', options?: { preserve?: string; resume?: string }): Promise<Record<string, unknown>>;
  artifact(uri: string): Promise<string>;
}

/** A failed Cairn call: `code` is the stable machine code. */
export class CairnError extends Error {
  readonly code: string;
}
/** The request itself is wrong: a missing or conflicting argument, a bad key or format. */
export class InvalidRequest extends CairnError {}
/** The caller may not do this here. */
export class Forbidden extends CairnError {}
/** The conversation, compaction, artifact or entry named does not exist. */
export class NotFound extends CairnError {}
/** An incremental call (`since`) the record cannot follow: send the whole history once. */
export class Diverged extends CairnError {}
/** The transcript could not be read; the message names the line. */
export class TranscriptInvalid extends CairnError {}
/** The conversation's state refuses a well-formed call (nothing to undo, a pin over budget). */
export class Refused extends CairnError {}
/** The host has no plugins and policy to run on. */
export class Unavailable extends CairnError {}
/** Anything else: storage, I/O, a bug. */
export class Internal extends CairnError {}
/** The policy file could not be read or fails its checks (the message names file:line:column). */
export class PolicyInvalid extends CairnError {}
/** A plugin directory could not be loaded (the message names the plugin). */
export class PluginsInvalid extends CairnError {}
/** The home could not be opened. */
export class HomeUnavailable extends CairnError {}

export const OPERATIONS: readonly string[];
export const ERROR_CODES: readonly string[];
export const version: string;
