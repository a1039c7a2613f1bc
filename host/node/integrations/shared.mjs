// What the framework integrations share: each model call reported to Cairn as a turn boundary,
// and the `session_history` tool's words and schema. Each integration keeps only what its
// framework's types need.

import { Diverged } from '../index.js';

/**
 * Reports one model call after another as turn boundaries of `conversation`: only what was
 * appended since the last report when the caller can say (Cairn's record holds the rest), the
 * whole history when it cannot or when the record cannot follow (Diverged). `compacted` stays
 * true once Cairn has compacted: from then on the framework must be handed Cairn's context.
 */
export function turnReporter(host, conversation, { window, reserve = 4096 } = {}, hook) {
  if (!window) throw new TypeError(`${hook}: \`window\` (the model's context window in tokens) is required`);
  const state = { turn: 0, since: null, compacted: false };
  const boundary = (chat, since) => host.boundary(conversation, chat, { turn: state.turn, window, reserve, since, includeTranscript: true });
  return {
    get compacted() {
      return state.compacted;
    },
    /** One call: `appended` (chat messages, or null when unknown) and `whole()`; Cairn's answer
     * and whether this call compacted. */
    async turn(appended, whole) {
      state.turn += 1;
      let answer;
      try {
        answer = state.since && appended ? await boundary(appended, state.since) : await boundary(whole(), undefined);
      } catch (error) {
        if (!(error instanceof Diverged)) throw error;
        answer = await boundary(whole(), undefined);
      }
      state.since = answer.acknowledged;
      const compactedNow = ['compacted', 'handed-over'].includes(answer.action?.kind);
      state.compacted ||= compactedNow;
      return { answer, compactedNow };
    },
  };
}

/** The `session_history` tool as every integration offers it: name, description, JSON schema,
 * and what a call does. */
export const HISTORY_TOOL = {
  name: 'session_history',
  description:
    'Read what earlier compactions of this session set aside: action "summary" lists them, "search" finds a word or id in them (query), "page" reads one (archive_id), "artifact" returns an original output whole (uri, an artifact:// URI from the context).',
  schema: {
    type: 'object',
    properties: {
      action: { type: 'string', enum: ['summary', 'search', 'page', 'artifact'] },
      query: { type: 'string' },
      archive_id: { type: 'string' },
      uri: { type: 'string' },
    },
    required: ['action'],
    additionalProperties: false,
  },
};

/** What a `session_history` call answers: the history's answer as JSON text. */
export const readHistory = (host, conversation) => async ({ action, ...fields }) => JSON.stringify(await host.history(conversation, action, fields));
