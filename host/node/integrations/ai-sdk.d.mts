// Types of `cairn-compaction/ai-sdk` (ai-sdk.mjs): Cairn as the Vercel AI SDK's compaction.
import type { ModelMessage, PrepareStepFunction, Tool, ToolSet } from 'ai';

import type { Host } from '../index.js';

export interface PrepareStepOptions {
  /** The model's context window in tokens. */
  window: number;
  /** What a step needs beside the messages (its output, the tools' schemas); default 4096. */
  reserve?: number;
}

/** A `prepareStep` that compacts through Cairn at the boundaries its policy chooses. */
export function prepareStep<TOOLS extends ToolSet = ToolSet>(host: Host, conversation: string, options: PrepareStepOptions): PrepareStepFunction<TOOLS>;

/** Cairn's `session_history` as an AI SDK tool. */
export function sessionHistoryTool(host: Host, conversation: string): Tool<{ action: 'summary' | 'search' | 'page' | 'artifact'; query?: string; archive_id?: string; uri?: string }, string>;

/** AI SDK ModelMessages as OpenAI chat messages. */
export function toChat(messages: ModelMessage[]): Array<Record<string, unknown>>;

/** OpenAI chat messages as AI SDK ModelMessages. */
export function fromChat(chat: Array<Record<string, unknown>>): ModelMessage[];
