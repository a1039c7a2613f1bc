// Helpers plugin authors keep needing, as the Rust SDK (`sdk/rust/src/helpers.rs`) has them:
// token counts, tool calls, ranges, config loading, agent requests, summaries, the model and
// the archive, logging. Everything that reaches the host goes through `host.js`, so plugin logic
// built on these runs in plain node with a fake host.

import { capability, hasCapability } from './host.js';
import { ArchiveError, ModelError, StrategyError, errorVariant } from './errors.js';
import { charCount, clipChars, entryText } from './rules.js';

/** @typedef {import('cairn:compaction/types@0.2.0').Entry} Entry */
/** @typedef {import('cairn:compaction/types@0.2.0').EntryRange} EntryRange */
/** @typedef {import('cairn:compaction/types@0.2.0').ReplacementEntry} ReplacementEntry */
/** @typedef {import('./conversation.js').CompactRequest} CompactRequest */
/** @typedef {import('cairn:compaction/types@0.2.0').TriggerInput} TriggerInput */
/** @typedef {import('cairn:compaction/types@0.2.0').TriggerDecision} TriggerDecisionVariant */
/** @typedef {import('cairn:compaction/types@0.2.0').CommitDecision} CommitDecisionVariant */
/** @typedef {import('cairn:compaction/log@0.2.0').Level} LogLevel */
/** @typedef {import('cairn:compaction/archive@0.2.0').Summary} ArchiveSummary */
/** @typedef {import('cairn:compaction/archive@0.2.0').Hits} ArchiveHits */
/** @typedef {import('cairn:compaction/archive@0.2.0').Page} ArchivePage */

// ---- logging ------------------------------------------------------------------------------

/**
 * One line into the host's `tracing`, tagged with the plugin's name (`CAIRN_LOG=info` shows it).
 * Does nothing when the manifest does not declare `log`: logging never breaks a plugin.
 * @param {LogLevel} level
 * @param {string} message
 */
export function log(level, message) {
  if (hasCapability('log')) {
    capability('log').log(level, message);
  }
}

/** @param {string} message */
export const logDebug = (message) => log('debug', message);
/** @param {string} message */
export const logInfo = (message) => log('info', message);
/** @param {string} message */
export const logWarn = (message) => log('warn', message);
/** @param {string} message */
export const logError = (message) => log('error', message);

// ---- tokens -------------------------------------------------------------------------------

/**
 * Exact token count by the host's tokenizer (the `tokens` capability; declare it).
 * @param {string} text
 * @returns {number}
 */
export function countTokens(text) {
  return capability('tokens').count(text);
}

/**
 * Recounts an entry's tokens after its parts changed; returns the same entry.
 * @param {Entry} entry
 * @returns {Entry}
 */
export function recount(entry) {
  entry.tokens = countTokens(entryText(entry));
  return entry;
}

// ---- entries ------------------------------------------------------------------------------

/**
 * Maps each tool call id to the call's name and JSON arguments (a later call with the same id wins).
 * @param {Entry[]} entries
 * @returns {Map<string, { name: string, args: string }>}
 */
export function toolCalls(entries) {
  const calls = new Map();
  for (const entry of entries) {
    for (const part of entry.parts) {
      if (part.tag === 'tool-call') {
        calls.set(part.val.id, { name: part.val.name, args: part.val.args });
      }
    }
  }
  return calls;
}

/**
 * The range covering `entries[first..=last]`.
 * @param {Entry[]} entries
 * @param {number} first
 * @param {number} last
 * @returns {EntryRange}
 */
export function rangeOf(entries, first, last) {
  if (!(first >= 0 && first <= last && last < entries.length)) {
    throw new RangeError(`rangeOf: ${first}..=${last} is not a range of ${entries.length} entries`);
  }
  return { first: entries[first].id, last: entries[last].id };
}

/**
 * An outcome replacing `replaced` by `replacement`; checkpoint, seed and retrospective are none
 * unless given.
 * `replacement` holds entries, and (from `compactLent`) `original(i)` for entries kept unchanged.
 * @template {Entry | ReplacementEntry} R
 * @param {EntryRange} replaced
 * @param {R[]} replacement
 * @param {{ checkpoint?: string | null, seed?: string | null, retrospective?: string | null }} [extra]
 * @returns {{ replaced: EntryRange, replacement: R[], checkpoint: string | null, seed: string | null, retrospective: string | null }}
 */
export function outcome(replaced, replacement, extra = {}) {
  return {
    replaced,
    replacement,
    // The component runtime reads `null` as none.
    checkpoint: extra.checkpoint ?? null,
    seed: extra.seed ?? null,
    retrospective: extra.retrospective ?? null,
  };
}

/**
 * The text parts of an entry joined by newlines (no thinking, tool traffic or placeholders).
 * @param {Entry} entry
 * @returns {string}
 */
export function messageText(entry) {
  return entry.parts.flatMap((part) => (part.tag === 'text' ? [part.val] : [])).join('\n');
}

/**
 * True for what the operator typed: intent that summaries must keep verbatim.
 * @param {Entry} entry
 * @returns {boolean}
 */
export function isOperatorMessage(entry) {
  return entry.origin === 'operator' && entry.role === 'user';
}

// ---- text ---------------------------------------------------------------------------------

/**
 * The last `max` chars of `text` (Unicode scalar values).
 * @param {string} text
 * @param {number} max
 * @returns {string}
 */
export function tailChars(text, max) {
  const len = charCount(text);
  if (len <= max) {
    return text;
  }
  const chars = Array.from(text);
  return chars.slice(len - max).join('');
}

// Rust's `char::is_whitespace` (Unicode White_Space), which `trim_end` uses. JS's `\s` differs
// (it has U+FEFF and lacks U+0085), and the host compares texts exactly.
const TRAILING_WHITE_SPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/u;

/**
 * `text` clipped to at most `max` chars, ending in `…` when something was cut.
 * @param {string} text
 * @param {number} max
 * @returns {string}
 */
export function clipEllipsis(text, max) {
  if (charCount(text) <= max) {
    return text;
  }
  return `${clipChars(text, Math.max(0, max - 1)).replace(TRAILING_WHITE_SPACE, '')}…`;
}

// ---- config -------------------------------------------------------------------------------

/** @param {unknown} value */
function jsonKind(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  switch (typeof value) {
    case 'number':
      return 'a number';
    case 'boolean':
      return 'a boolean';
    case 'string':
      return 'a string';
    default:
      return 'an object';
  }
}

/**
 * The plugin's config: the JSON text the policy gives (`""` when it gives none) read over
 * `defaults`. Empty text → a copy of the defaults; a key missing from the text keeps its default;
 * a key not in `defaults` is an error (a typo must not silently become a default), and so is a
 * value of another JSON type than its default's (a `null` default takes any value).
 * Errors are `StrategyError.failed("config: …")`: a strategy just lets them propagate.
 * @template {Record<string, unknown>} T
 * @param {string} text
 * @param {T} defaults
 * @returns {T}
 */
export function parseConfig(text, defaults) {
  // A deep copy, so a plugin may change its config without touching the defaults.
  const config = /** @type {T} */ (JSON.parse(JSON.stringify(defaults)));
  if (text.trim() === '') {
    return config;
  }
  /** @type {unknown} */
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw StrategyError.failed(`config: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw StrategyError.failed(`config: expected a JSON object, found ${jsonKind(parsed)}`);
  }
  const known = Object.keys(defaults);
  for (const [key, value] of Object.entries(parsed)) {
    if (!known.includes(key)) {
      const expected = known.map((k) => `\`${k}\``).join(', ');
      throw StrategyError.failed(`config: unknown field \`${key}\`, expected ${known.length ? `one of ${expected}` : 'no fields'}`);
    }
    const fallback = defaults[key];
    const wanted = jsonKind(fallback);
    if (fallback !== null && jsonKind(value) !== wanted) {
      throw StrategyError.failed(`config: invalid type for \`${key}\`: expected ${wanted}, found ${jsonKind(value)}`);
    }
    if (typeof value === 'number' && !Number.isFinite(value)) {
      throw StrategyError.failed(`config: \`${key}\` must be a finite number`);
    }
    /** @type {Record<string, unknown>} */ (config)[key] = value;
  }
  return config;
}

/**
 * For plugins that have no error to return (triggers, commit policies): a broken config must not
 * stop maintenance, so the error is logged as a warning and the defaults are used.
 * @template T
 * @param {() => T} load
 * @param {T} defaults
 * @returns {T}
 */
export function configOrDefaults(load, defaults) {
  try {
    return load();
  } catch (error) {
    logWarn(`${error instanceof Error ? error.message : String(error)}; using the defaults`);
    return /** @type {T} */ (JSON.parse(JSON.stringify(defaults)));
  }
}

/**
 * A trigger's (or commit policy's) config as `parseConfig` reads it, or the defaults with a
 * warning when it is broken (see `configOrDefaults`).
 * @template {Record<string, unknown>} T
 * @param {string} text
 * @param {T} defaults
 * @returns {T}
 */
export function triggerConfig(text, defaults) {
  return configOrDefaults(() => parseConfig(text, defaults), defaults);
}

// ---- decisions ----------------------------------------------------------------------------

/** Builders of `trigger-decision` values. */
export const TriggerDecision = Object.freeze({
  /** @returns {TriggerDecisionVariant} */
  none: () => ({ tag: 'none' }),
  /** A line for the agent, appended to the turn. @param {string} text @returns {TriggerDecisionVariant} */
  advise: (text) => ({ tag: 'advise', val: text }),
  /** @param {string} why @returns {TriggerDecisionVariant} */
  compact: (why) => ({ tag: 'compact', val: why }),
  /** @param {string} why @returns {TriggerDecisionVariant} */
  handover: (why) => ({ tag: 'handover', val: why }),
});

/** Builders of `commit-decision` values. */
export const CommitDecision = Object.freeze({
  /** @returns {CommitDecisionVariant} */
  commit: () => ({ tag: 'commit' }),
  /** Not now, whatever the outcome: the chain ends. @param {string} why @returns {CommitDecisionVariant} */
  defer: (why) => ({ tag: 'defer', val: why }),
  /** Not this outcome: the chain's next step gets the turn. @param {string} why @returns {CommitDecisionVariant} */
  reject: (why) => ({ tag: 'reject', val: why }),
});

/**
 * The agent's pending request as a decision, `compaction requested by the agent` or `handover
 * requested by the agent`, with `context` (e.g. `context at 63% of the window`) in parentheses when
 * given. `null` when nothing is pending or a cooldown is still running: a request waits for the
 * cooldown, like any automatic action.
 * @param {TriggerInput} input
 * @param {string | null} [context]
 * @returns {TriggerDecisionVariant | null}
 */
export function pendingRequestDecision(input, context = null) {
  if (input.cooldownLeft > 0 || !input.pendingRequest) {
    return null;
  }
  const at = context ? ` (${context})` : '';
  return input.pendingRequest.kind === 'compact'
    ? TriggerDecision.compact(`compaction requested by the agent${at}`)
    : TriggerDecision.handover(`handover requested by the agent${at}`);
}

// ---- strategies ---------------------------------------------------------------------------

/**
 * The entries a strategy replaces, `[protectedHead, tailStart - 1]` as inclusive indices (for a
 * handover the host sets `tailStart` to the end). Throws `nothing-to-do` when that is empty.
 * @param {CompactRequest} request
 * @returns {{ first: number, last: number }}
 */
export function replaceableRange(request) {
  const first = request.protectedHead;
  const end = Math.min(request.tailStart, request.entries.length);
  if (end <= first) {
    throw StrategyError.nothingToDo('no entries between the protected head and the verbatim tail');
  }
  return { first, last: end - 1 };
}

/**
 * A summary entry for the host to number: user role, `summary` origin, one text part.
 * @param {string} text
 * @returns {Entry}
 */
export function summaryEntry(text) {
  return { id: '', role: 'user', origin: 'summary', parts: [{ tag: 'text', val: text }], tokens: 0, turn: 0, pinned: false };
}

/**
 * A replacement for `replaced`: one summary entry, then the range's pinned entries unchanged (the
 * host refuses outcomes that drop or alter a pinned entry).
 * @param {Entry[]} replaced
 * @param {string} text
 * @returns {Entry[]}
 */
export function summaryReplacement(replaced, text) {
  return [summaryEntry(text), ...replaced.filter((entry) => entry.pinned)];
}

// ---- model --------------------------------------------------------------------------------

/**
 * One completion: a system prompt and a user message (the `model` capability; declare it).
 * Throws `ModelError` when the host answers with an error.
 * @param {string} system
 * @param {string} user
 * @param {number} maxTokens
 * @returns {string}
 */
export function askModel(system, user, maxTokens) {
  const model = capability('model');
  try {
    return model.complete({
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: user },
      ],
      maxTokens,
    });
  } catch (thrown) {
    throw new ModelError(/** @type {import('./errors.js').ModelErrorVariant} */ (errorVariant(thrown)));
  }
}

/**
 * A model error as a strategy error: every kind means "no usable model here" (`unavailable`).
 * Plugins that hold `model` as optional handle `denied` before, by falling back.
 * @param {ModelError} error
 * @returns {StrategyError}
 */
export function modelUnavailable(error) {
  const variant = error.variant;
  switch (variant.tag) {
    case 'denied':
      return StrategyError.unavailable(`model denied: ${variant.val}`);
    case 'unavailable':
      return StrategyError.unavailable(`model unavailable: ${variant.val}`);
    case 'timeout':
      return StrategyError.unavailable('model timed out');
    default:
      return StrategyError.unavailable(`model failed: ${variant.val}`);
  }
}

/**
 * For strategies that hold `model` as optional: asks the model once. The reply when it answered;
 * `null` when the policy does not grant `model` (logged as `model not granted: {fallback}`, where
 * `fallback` names the model-free way taken instead); any other model error is thrown as the
 * step's error (`modelUnavailable`), so the chain moves on.
 * @param {string} system
 * @param {string} user
 * @param {number} maxTokens
 * @param {string} fallback
 * @returns {string | null}
 */
export function askModelOrFallback(system, user, maxTokens, fallback) {
  try {
    return askModel(system, user, maxTokens);
  } catch (error) {
    if (!(error instanceof ModelError)) {
      throw error;
    }
    if (error.tag === 'denied') {
      logInfo(`model not granted: ${fallback}`);
      return null;
    }
    throw modelUnavailable(error);
  }
}

// ---- archive ------------------------------------------------------------------------------

/**
 * Calls one archive function, turning an error answer into `ArchiveError`.
 * @template T
 * @param {() => T} call
 * @returns {T}
 */
function archiveCall(call) {
  try {
    return call();
  } catch (thrown) {
    throw new ArchiveError(/** @type {import('./errors.js').ArchiveErrorVariant} */ (errorVariant(thrown)));
  }
}

/**
 * An overview of this conversation's archives, newest first (needs the `archive:read` grant).
 * @returns {ArchiveSummary}
 */
export function readArchiveSummary() {
  const archive = capability('archive');
  return archiveCall(() => archive.readSummary());
}

/**
 * Ranked keyword search over every archived entry of this conversation (`archive:read`).
 * @param {string} query
 * @param {number} [offset]
 * @param {number} [limit]
 * @returns {ArchiveHits}
 */
export function searchArchive(query, offset = 0, limit = 20) {
  const archive = capability('archive');
  return archiveCall(() => archive.search(query, offset, limit));
}

/**
 * Entries `[offset, offset + limit)` of one archive; `charOffset` applies to the first (`archive:read`).
 * @param {string} archiveId
 * @param {number} [offset]
 * @param {number} [limit]
 * @param {number} [charOffset]
 * @returns {ArchivePage}
 */
export function pageArchive(archiveId, offset = 0, limit = 30, charOffset = 0) {
  const archive = capability('archive');
  return archiveCall(() => archive.pageEntries(archiveId, offset, limit, charOffset));
}

/**
 * Stores `content` with this compaction's archive and returns its `artifact://` URI; kept only if
 * the step's outcome is committed (needs the `archive:write` grant).
 * @param {string} content
 * @returns {string}
 */
export function putArtifact(content) {
  const archive = capability('archive');
  return archiveCall(() => archive.putArtifact(content));
}
