// Types of `cairn-compaction/langgraph` (langgraph.mjs): Cairn as LangGraph.js's compaction.
import type { BaseMessage } from '@langchain/core/messages';
import type { DynamicStructuredTool } from '@langchain/core/tools';

import type { Host } from '../index.js';

export interface PreModelHookOptions {
  /** The model's context window in tokens. */
  window: number;
  /** What a call needs beside the messages (its output, the tools' schemas); default 4096. */
  reserve?: number;
}

/** A `preModelHook` (a graph node before the model) that compacts through Cairn. */
export function preModelHook(host: Host, conversation: string, options: PreModelHookOptions): (state: { messages: BaseMessage[] }) => Promise<{ llmInputMessages: BaseMessage[] }>;

/** Cairn's `session_history` as a LangChain tool. */
export function sessionHistoryTool(host: Host, conversation: string): DynamicStructuredTool;

/** LangChain messages as OpenAI chat messages. */
export function toChat(messages: BaseMessage[]): Array<Record<string, unknown>>;

/** OpenAI chat messages as LangChain messages. */
export function fromChat(chat: Array<Record<string, unknown>>): BaseMessage[];
