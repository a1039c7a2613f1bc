// The conversation a strategy is lent (contract 0.2.0). The host keeps the entries; a strategy
// reads what it needs through a `History`. By default `strategyExport` reads every entry in one
// batch, calls `compact(request)` and sends each replacement entry equal to the original of its
// id back as `original(index)`. A strategy that needs less defines `compactLent(history, request)`.

import { ArchiveError, StrategyError, errorVariant } from './errors.js';
import { countTokens, putArtifact } from './helpers.js';

/** @typedef {import('cairn:compaction/types@0.2.0').Entry} Entry */
/** @typedef {import('cairn:compaction/types@0.2.0').Part} Part */
/** @typedef {import('cairn:compaction/types@0.2.0').EntryOutline} EntryOutline */
/** @typedef {import('cairn:compaction/types@0.2.0').PartOutline} PartOutline */
/** @typedef {import('cairn:compaction/types@0.2.0').ReplacementEntry} ReplacementEntry */
/** @typedef {import('cairn:compaction/types@0.2.0').Outcome} WireOutcome */
/** @typedef {import('cairn:compaction/conversation@0.2.0').History} LentResource */
/**
 * The request as the host sends it: no entries (the conversation is lent).
 * @typedef {import('cairn:compaction/types@0.2.0').CompactRequest} LentRequest
 */
/**
 * The request `compact` gets: the host's, with every entry of the conversation.
 * @typedef {LentRequest & { entries: Entry[] }} CompactRequest
 */
/**
 * A strategy's outcome. `compact` answers with whole entries; `compactLent` may also use
 * `original(i)` for the conversation's entry `i`, unchanged.
 * @typedef {Omit<WireOutcome, 'replacement'> & { replacement: Array<Entry | ReplacementEntry> }} Outcome
 */

/** What `History` reads from: a list of entries (a test, a native run) or the host's resource. */
/** @typedef {Entry[] | Pick<LentResource, 'len' | 'entries' | 'outlines' | 'partText' | 'partTokens' | 'setAside'>} HistorySource */

/** Indexes cross as u32: the host clamps them to the conversation. */
const U32_MAX = 0xffff_ffff;

/** @param {number} n */
const u32 = (n) => Math.min(Math.max(Math.trunc(n), 0), U32_MAX);

/**
 * The conversation being compacted, by index (positions, as `protectedHead` and `tailStart` are).
 * Valid only during the call it was passed to.
 */
export class History {
  /** @type {HistorySource} */
  #source;

  /** @param {HistorySource} source the entries themselves, or the host's lent `history` */
  constructor(source) {
    this.#source = source;
  }

  /** How many entries the conversation has. @returns {number} */
  len() {
    return Array.isArray(this.#source) ? this.#source.length : this.#source.len();
  }

  /**
   * Entries [start, end), whole, in one crossing (clamped; `end` defaults to the end).
   * @param {number} [start]
   * @param {number} [end]
   * @returns {Entry[]}
   */
  entries(start = 0, end = U32_MAX) {
    const source = this.#source;
    return Array.isArray(source) ? source.slice(...clamp(source.length, start, end)) : source.entries(u32(start), u32(end));
  }

  /**
   * Entries [start, end) without their text (clamped).
   * @param {number} [start]
   * @param {number} [end]
   * @returns {EntryOutline[]}
   */
  outlines(start = 0, end = U32_MAX) {
    const source = this.#source;
    return Array.isArray(source) ? source.slice(...clamp(source.length, start, end)).map(outline) : source.outlines(u32(start), u32(end));
  }

  /**
   * The text of part `part` of entry `index` (a tool call's: its arguments); `null` when there is
   * no such part.
   * @param {number} index
   * @param {number} part
   * @returns {string | null}
   */
  partText(index, part) {
    const source = this.#source;
    if (index < 0 || part < 0) return null;
    if (!Array.isArray(source)) return source.partText(u32(index), u32(part)) ?? null;
    const found = source[index]?.parts[part];
    return found === undefined ? null : partText(found);
  }

  /**
   * The tokens of that text by the host's tokenizer (in the component, without the text crossing).
   * @param {number} index
   * @param {number} part
   * @returns {number | null}
   */
  partTokens(index, part) {
    const source = this.#source;
    if (index < 0 || part < 0) return null;
    if (!Array.isArray(source)) return source.partTokens(u32(index), u32(part)) ?? null;
    const text = this.partText(index, part);
    return text === null ? null : countTokens(text);
  }

  /**
   * Stores that text with this compaction's archive (needs `archive:write`) and returns its
   * `artifact://` URI; throws `ArchiveError` as `putArtifact` does.
   * @param {number} index
   * @param {number} part
   * @returns {string}
   */
  setAside(index, part) {
    const source = this.#source;
    if (Array.isArray(source)) {
      const text = this.partText(index, part);
      if (text === null) throw StrategyError.failed(`entry ${index} has no part ${part}`);
      return putArtifact(text);
    }
    try {
      return source.setAside(u32(index), u32(part));
    } catch (thrown) {
      // set-aside-error's cases, as the archive's: too large is an invalid request.
      const { tag, val } = errorVariant(thrown);
      throw new ArchiveError(/** @type {import('./errors.js').ArchiveErrorVariant} */ ({ tag: tag === 'too-large' ? 'invalid' : tag, val }));
    }
  }
}

/**
 * @param {number} length
 * @param {number} start
 * @param {number} end
 * @returns {[number, number]}
 */
function clamp(length, start, end) {
  const to = Math.min(Math.max(end, 0), length);
  return [Math.min(Math.max(start, 0), to), to];
}

/**
 * In a replacement: the conversation's entry `index`, unchanged (only the index crosses back).
 * @param {number} index
 * @returns {ReplacementEntry}
 */
export function original(index) {
  return { tag: 'original', val: index };
}

/**
 * The text of one part, as `History.partText` gives it (a tool call's: its arguments).
 * @param {Part} part
 * @returns {string}
 */
export function partText(part) {
  switch (part.tag) {
    case 'tool-result':
      return part.val.content;
    case 'tool-call':
      return part.val.args;
    case 'placeholder':
      return part.val.text;
    default:
      return part.val;
  }
}

/**
 * UTF-8 bytes of `text`, without `TextEncoder` (QuickJS in the component has none).
 * @param {string} text
 */
function utf8Bytes(text) {
  let bytes = 0;
  for (const ch of text) {
    const code = /** @type {number} */ (ch.codePointAt(0));
    bytes += code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
  }
  return bytes;
}

/**
 * An entry's outline, as the host makes it (sizes in UTF-8 bytes).
 * @param {Entry} entry
 * @returns {EntryOutline}
 */
export function outline(entry) {
  /** @type {(part: Part) => PartOutline} */
  const partOutline = (part) => {
    switch (part.tag) {
      case 'tool-result': {
        const { callId, content, isError, elided } = part.val;
        return { tag: 'tool-result', val: { callId, bytes: utf8Bytes(content), isError, elided: elided ?? null } };
      }
      case 'tool-call':
      case 'placeholder':
        return part;
      default:
        return { tag: part.tag, val: utf8Bytes(part.val) };
    }
  };
  const { id, role, origin, tokens, turn, pinned } = entry;
  return { id, role, origin, parts: entry.parts.map(partOutline), tokens, turn, pinned };
}

/**
 * A request as the host sends it: its entries as a `History`, the rest as the lent request.
 * For testing `compactLent`: `plugin.compactLent(...lend(request))`.
 * @param {CompactRequest} request
 * @returns {[History, LentRequest]}
 */
export function lend(request) {
  const { entries, ...lent } = request;
  return [new History(entries), lent];
}

/**
 * Everything the host reads of an entry, flat, by reference (strings are immutable: nothing is
 * copied). Taken before `compact` runs, which may change the entries it was given in place.
 * @param {Entry} entry
 * @returns {unknown[]}
 */
function snapshot(entry) {
  /** @type {unknown[]} */
  const flat = [entry.id, entry.role, entry.origin, entry.tokens, entry.turn, entry.pinned, entry.parts.length];
  for (const part of entry.parts) {
    flat.push(part.tag);
    switch (part.tag) {
      case 'tool-call':
        flat.push(part.val.id, part.val.name, part.val.args);
        break;
      case 'tool-result':
        flat.push(part.val.callId, part.val.content, part.val.isError, part.val.elided ?? null);
        break;
      case 'placeholder':
        flat.push(part.val.text, part.val.uri ?? null);
        break;
      default:
        flat.push(part.val);
    }
  }
  return flat;
}

/**
 * @param {unknown[]} a
 * @param {unknown[]} b
 */
function same(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * The outcome as the host reads it: `original(i)` and `entry(e)` as they are, a bare entry as
 * `original(i)` when `originals` knows it unchanged, else as `entry`.
 * @param {Outcome} outcome
 * @param {Map<string, { index: number, flat: unknown[] }>} [originals]
 * @returns {WireOutcome}
 */
export function toWire(outcome, originals) {
  if (outcome === null || typeof outcome !== 'object' || !Array.isArray(outcome.replacement)) {
    throw StrategyError.failed('compact must return an outcome ({ replaced, replacement, … }); see `outcome(…)`');
  }
  /** @type {(item: Entry | ReplacementEntry) => ReplacementEntry} */
  const wire = (item) => {
    if ('tag' in item && (item.tag === 'original' || item.tag === 'entry')) return item;
    const entry = /** @type {Entry} */ (item);
    const known = entry.id ? originals?.get(entry.id) : undefined;
    return known && same(known.flat, snapshot(entry)) ? original(known.index) : { tag: 'entry', val: entry };
  };
  return {
    replaced: outcome.replaced,
    replacement: outcome.replacement.map(wire),
    checkpoint: outcome.checkpoint ?? null,
    seed: outcome.seed ?? null,
    retrospective: outcome.retrospective ?? null,
  };
}

/**
 * `outcome` with each `original(i)` (and `entry(e)`) as the whole entry: what contract 0.1.0 reads.
 * @param {Outcome} outcome
 * @param {Entry[]} entries the conversation
 * @returns {Outcome}
 */
export function wholeEntries(outcome, entries) {
  if (outcome === null || typeof outcome !== 'object' || !Array.isArray(outcome.replacement)) return outcome;
  /** @type {(item: Entry | ReplacementEntry) => Entry} */
  const whole = (item) => {
    if (!('tag' in item)) return /** @type {Entry} */ (item);
    if (item.tag === 'entry') return item.val;
    const found = entries[item.val];
    if (found === undefined) throw StrategyError.failed(`the replacement names original entry ${item.val}; the conversation has ${entries.length}`);
    return found;
  };
  return { ...outcome, replacement: outcome.replacement.map(whole) };
}

/**
 * The default path: every entry in one batch, `compact`, then each replacement entry equal to the
 * original of its id sent as `original(index)`.
 * @param {History} history
 * @param {LentRequest} request
 * @param {(request: CompactRequest) => Outcome} compact
 * @returns {WireOutcome}
 */
export function compactWithEveryEntry(history, request, compact) {
  const entries = history.entries(0, history.len());
  /** @type {Map<string, { index: number, flat: unknown[] }>} */
  const originals = new Map();
  entries.forEach((entry, index) => originals.set(entry.id, { index, flat: snapshot(entry) }));
  return toWire(compact({ ...request, entries }), originals);
}
