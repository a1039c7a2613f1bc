// Stand-ins for the host in plain node (`node --test`): install them, then call plugin logic
// exactly as the component would. Nothing here is bundled into a component unless imported.

import { installHost } from './host.js';

export { History, lend } from './conversation.js';

/** @typedef {import('cairn:compaction/types@0.2.0').Entry} Entry */
/** @typedef {import('cairn:compaction/types@0.2.0').Part} Part */
/** @typedef {import('cairn:compaction/model@0.2.0').CompletionRequest} CompletionRequest */
/** @typedef {import('cairn:compaction/log@0.2.0').Level} LogLevel */
/** @typedef {import('./host.js').Host} Host */

/**
 * A rough token count for tests (one per 4 chars, rounded up): not the host's tokenizer, so never
 * assert exact host counts with it.
 * @param {string} text
 * @returns {number}
 */
export function approximateTokens(text) {
  return Math.ceil(text.length / 4);
}

/**
 * @typedef {object} FakeHostOptions
 * @property {(text: string) => number} [tokens] token counter; default `approximateTokens`
 * @property {(request: CompletionRequest) => string} [model] the model; throw a `model-error`
 *   variant (`{ tag: 'denied', val: '…' }`) to answer with an error. Absent: no `model` capability.
 * @property {Partial<NonNullable<Host['archive']>> | boolean} [archive] archive functions to use; `true`
 *   (the default) gives an in-memory archive whose `putArtifact` returns `artifact://test/<n>`;
 *   `false` leaves the capability out.
 */

/**
 * Installs a fake host and returns what it records: log lines and stored artifacts.
 * @param {FakeHostOptions} [options]
 * @returns {{ logs: { level: LogLevel, message: string }[], artifacts: string[] }}
 */
export function fakeHost(options = {}) {
  /** @type {{ level: LogLevel, message: string }[]} */
  const logs = [];
  /** @type {string[]} */
  const artifacts = [];
  /** @type {Host} */
  const host = {
    log: { log: (level, message) => void logs.push({ level, message }) },
    tokens: { count: options.tokens ?? approximateTokens },
  };
  if (options.model) {
    host.model = { complete: options.model };
  }
  const archive = options.archive ?? true;
  if (archive !== false) {
    host.archive = {
      readSummary: () => ({ text: `${artifacts.length} artifact(s) stored in this test.\n`, truncated: false }),
      search: () => ({ hits: [], total: 0, nextOffset: null, clamped: null }),
      pageEntries: (archiveId) => ({ archiveId, entries: [], total: 0, nextOffset: null, clamped: null }),
      putArtifact: (content) => {
        artifacts.push(content);
        return `artifact://test/${artifacts.length}`;
      },
      ...(archive === true ? {} : archive),
    };
  }
  installHost(host);
  return { logs, artifacts };
}

/** Builders of entry parts, for tests. */
export const part = Object.freeze({
  /** @param {string} text @returns {Part} */
  text: (text) => ({ tag: 'text', val: text }),
  /** @param {string} text @returns {Part} */
  thinking: (text) => ({ tag: 'thinking', val: text }),
  /** @param {string} id @param {string} name @param {string} [args] @returns {Part} */
  toolCall: (id, name, args = '{}') => ({ tag: 'tool-call', val: { id, name, args } }),
  /** @param {string} callId @param {string} content @param {boolean} [isError] @returns {Part} */
  toolResult: (callId, content, isError = false) => ({ tag: 'tool-result', val: { callId, content, isError, elided: null } }),
  /** @param {string} text @param {string | null} [uri] @returns {Part} */
  placeholder: (text, uri = null) => ({ tag: 'placeholder', val: { text, uri } }),
  /** @param {string} reference @returns {Part} */
  image: (reference) => ({ tag: 'image', val: reference }),
});

/**
 * An entry for tests: an agent message by default; `tokens` defaults to `approximateTokens` of
 * its text parts.
 * @param {string} id
 * @param {Part[]} parts
 * @param {Partial<Entry>} [fields]
 * @returns {Entry}
 */
export function makeEntry(id, parts, fields = {}) {
  const text = parts.map((p) => (p.tag === 'text' ? p.val : '')).join('');
  return { id, role: 'assistant', origin: 'agent', parts, tokens: approximateTokens(text), turn: 0, pinned: false, ...fields };
}
