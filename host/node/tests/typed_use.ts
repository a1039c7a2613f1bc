// Type-checked, not run (tsc --strict in host/cli/tests/it/node_package.rs): the package's public
// API as a typed harness calls it.
import { Host, Diverged, CairnError, OPERATIONS } from 'cairn-compaction';

type Message = { role: string; content: string | null };

export async function compactAndRecall(host: Host, messages: Message[]): Promise<string> {
  const answer = await host.compact('app', messages, { window: 128_000 });
  const kept: Message[] | undefined = answer.transcript;
  const pinned: string[] = await host.pin('app', [String(answer['first_kept_entry_id'])]);
  try {
    await host.boundary('app', messages, { turn: 2, window: 128_000, since: 'm-1' });
  } catch (error) {
    if (error instanceof Diverged) {
      const code: string = error.code;
      return code + pinned.join(',') + String(kept?.length);
    }
    throw error;
  }
  const text: string | undefined = (await host.compact('text', 'a session file')).transcript;
  return String((await host.history('app', 'search', { query: 'id' }))['hits']) + text + OPERATIONS.join();
}

export function opened(): Host | CairnError {
  try {
    return new Host({ home: '/tmp/home', policy: 'policy.toml', pluginDirs: ['plugins'] });
  } catch (error) {
    return error as CairnError;
  }
}

// The AI SDK integration's types against the real `ai` package's.
import { generateText, type LanguageModel } from 'ai';
import { prepareStep, sessionHistoryTool } from 'cairn-compaction/ai-sdk';

export async function aiSdkHarness(host: Host, model: LanguageModel): Promise<string> {
  const result = await generateText({
    model,
    messages: [{ role: 'user', content: 'Fix the build.' }],
    tools: { session_history: sessionHistoryTool(host, 'app') },
    prepareStep: prepareStep(host, 'app', { window: 128_000 }),
  });
  return result.text;
}

// The OpenAI Agents SDK integration's types against the real `@openai/agents`'.
import { Agent, run } from '@openai/agents';
import { inputFilter, sessionHistoryTool as historyTool } from 'cairn-compaction/openai-agents';

export async function agentsHarness(host: Host): Promise<unknown> {
  const agent = new Agent({ name: 'coder', tools: [historyTool(host, 'app')] });
  const result = await run(agent, 'Fix the build.', { callModelInputFilter: inputFilter(host, 'app', { window: 128_000 }) });
  return result.finalOutput;
}

// The LangGraph.js integration's types against the real `@langchain/langgraph`'s.
import type { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { preModelHook, sessionHistoryTool as recallTool } from 'cairn-compaction/langgraph';

export function langGraphAgent(host: Host, llm: BaseChatModel) {
  return createReactAgent({ llm, tools: [recallTool(host, 'app')], preModelHook: preModelHook(host, 'app', { window: 128_000 }) });
}
