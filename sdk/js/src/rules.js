// The rules the host and every plugin must agree on, as `host/rules/src/lib.rs` (`cairn-rules`)
// writes them. The host checks every outcome with the Rust originals, so each function here must
// give byte-for-byte the same answer; `test/rules.test.js` pins them to the Rust crate's cases.
//
// "Chars" are Unicode scalar values, as in Rust: a JS string is iterated by code point, never by
// UTF-16 unit, so an emoji counts once.

/** @typedef {import('cairn:compaction/types@0.2.0').Entry} Entry */
/** @typedef {import('cairn:compaction/types@0.2.0').Part} Part */

/** How many operator messages a handover seed quotes… */
export const SEED_MESSAGES = 3;
/** …and how many characters of each. */
export const SEED_MESSAGE_CHARS = 2_000;

/**
 * The text the model reads in one part, without the newline `entryText` adds.
 * @param {Part} part
 * @returns {string}
 */
function partText(part) {
  switch (part.tag) {
    case 'text':
    case 'thinking':
    case 'image':
      return part.val;
    case 'placeholder':
      return part.val.text;
    case 'tool-call':
      return `${part.val.name} ${part.val.args}`;
    case 'tool-result':
      return part.val.content;
    default:
      throw new TypeError(`unknown part tag ${JSON.stringify(/** @type {{tag: unknown}} */ (part).tag)}`);
  }
}

/**
 * The text the model reads in an entry, as the host counts it (token counts are taken of this):
 * every part followed by a newline; a tool call reads `name args`, a placeholder its text.
 * @param {Entry} entry
 * @returns {string}
 */
export function entryText(entry) {
  let out = '';
  for (const part of entry.parts) {
    out += partText(part) + '\n';
  }
  return out;
}

/**
 * `cuts[i]` is true when history may be cut just before entry `i` without separating a tool call
 * from its result (no call made before `i` is answered at or after `i`). `cuts[entries.length]`
 * (the end) is always true. An unanswered call blocks no cut. The host checks the same rule.
 * @param {Entry[]} entries
 * @returns {boolean[]}
 */
export function safeCutPoints(entries) {
  /** @type {Map<string, number>} index of the first entry answering each call id */
  const answeredAt = new Map();
  entries.forEach((entry, i) => {
    for (const part of entry.parts) {
      if (part.tag === 'tool-result' && !answeredAt.has(part.val.callId)) {
        answeredAt.set(part.val.callId, i);
      }
    }
  });
  const cuts = new Array(entries.length + 1).fill(true);
  // One past the latest entry answering a call made so far.
  let reach = 0;
  entries.forEach((entry, i) => {
    cuts[i] = reach <= i;
    for (const part of entry.parts) {
      if (part.tag === 'tool-call') {
        const answer = answeredAt.get(part.val.id);
        if (answer !== undefined) {
          reach = Math.max(reach, answer + 1);
        }
      }
    }
  });
  return cuts;
}

/**
 * `12345` → `12,345`. Takes a non-negative integer (a number or a bigint).
 * @param {number | bigint} n
 * @returns {string}
 */
export function thousands(n) {
  if (typeof n === 'number' && !Number.isInteger(n)) {
    throw new RangeError(`thousands takes an integer, not ${n}`);
  }
  // BigInt prints every digit where a large number would switch to exponent notation.
  const value = BigInt(n);
  if (value < 0n) {
    throw new RangeError(`thousands takes a non-negative integer, not ${n}`);
  }
  const digits = value.toString();
  let out = '';
  for (let i = 0; i < digits.length; i++) {
    if (i > 0 && (digits.length - i) % 3 === 0) {
      out += ',';
    }
    out += digits[i];
  }
  return out;
}

/**
 * The text Cairn puts where content was set aside, e.g.
 * `[elided ~12,345 tokens — recover: artifact://a-…/3]`. The URI itself travels as data
 * (`tool-result.elided`, `placeholder.uri`); this text is for the model.
 * @param {string} what
 * @param {number} tokens
 * @param {string} uri
 * @returns {string}
 */
export function placeholderText(what, tokens, uri) {
  return `[${what} ~${thousands(tokens)} tokens — recover: ${uri}]`;
}

/**
 * The first `max` chars of `text` (Unicode scalar values, not UTF-16 units).
 * @param {string} text
 * @param {number} max
 * @returns {string}
 */
export function clipChars(text, max) {
  let seen = 0;
  let at = 0;
  for (const char of text) {
    if (seen === max) {
      return text.slice(0, at);
    }
    seen += 1;
    at += char.length;
  }
  return text;
}

/**
 * Number of chars (Unicode scalar values) in `text`, Rust's `text.chars().count()`.
 * @param {string} text
 * @returns {number}
 */
export function charCount(text) {
  let n = 0;
  for (const _ of text) {
    n += 1;
  }
  return n;
}
