// Types of `cairn-compaction/openai-agents` (openai-agents.mjs): Cairn as the OpenAI Agents
// SDK's compaction.
import type { AgentInputItem, CallModelInputFilter, FunctionTool } from '@openai/agents';

import type { Host } from '../index.js';

export interface InputFilterOptions {
  /** The model's context window in tokens. */
  window: number;
  /** What a call needs beside the input (its output, the tools' schemas); default 4096. */
  reserve?: number;
}

/** A `callModelInputFilter` that compacts through Cairn at the boundaries its policy chooses. */
export function inputFilter(host: Host, conversation: string, options: InputFilterOptions): CallModelInputFilter;

/** Cairn's `session_history` as a function tool. */
export function sessionHistoryTool(host: Host, conversation: string): FunctionTool;

/** The SDK's input items as OpenAI chat messages. */
export function toChat(items: AgentInputItem[]): Array<Record<string, unknown>>;

/** OpenAI chat messages as the SDK's input items. */
export function fromChat(chat: Array<Record<string, unknown>>): AgentInputItem[];
