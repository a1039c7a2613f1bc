// {{name}}: a strategy that needs no model. The entries between the protected head and the
// verbatim tail become one digest entry: what the operator asked, verbatim (clipped), and how
// many tool calls the agent made of each kind. Pinned entries stay, unchanged.

import {
  Strategy,
  StrategyError,
  clipEllipsis,
  isOperatorMessage,
  logInfo,
  messageText,
  outcome,
  parseConfig,
  rangeOf,
  replaceableRange,
  safeCutPoints,
  strategyExport,
  summaryReplacement,
  thousands,
} from '@cairn/sdk';

/** @typedef {import('@cairn/sdk').CompactRequest} CompactRequest */
/** @typedef {import('cairn:compaction/types@0.2.0').Entry} Entry */
/** @typedef {import('@cairn/sdk').Outcome} Outcome */

export const DEFAULTS = Object.freeze({
  /** Each operator message is kept up to this many chars. */
  operator_chars: 600,
});

/**
 * The digest of `entries`.
 * @param {Entry[]} entries
 * @param {{ operator_chars: number }} config
 * @returns {string}
 */
export function digest(entries, config) {
  const asked = entries.filter(isOperatorMessage).map((e) => `- ${clipEllipsis(messageText(e), config.operator_chars)}`);
  /** @type {Map<string, number>} */
  const calls = new Map();
  for (const entry of entries) {
    for (const part of entry.parts) {
      if (part.tag === 'tool-call') {
        calls.set(part.val.name, (calls.get(part.val.name) ?? 0) + 1);
      }
    }
  }
  const tokens = entries.reduce((sum, e) => sum + e.tokens, 0);
  const lines = [`[Digest of ${entries.length} earlier entries (~${thousands(tokens)} tokens).`];
  lines.push(asked.length ? 'The operator asked, verbatim:' : 'The operator asked nothing in this part.', ...asked);
  const total = [...calls.values()].reduce((a, b) => a + b, 0);
  if (total > 0) {
    const byName = [...calls].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([name, n]) => `${name} ×${n}`);
    lines.push(`The agent made ${total} tool calls: ${byName.join(', ')}.`);
  }
  return `${lines.join('\n')}]`;
}

export class Digest extends Strategy {
  /**
   * @param {CompactRequest} request
   * @returns {Outcome}
   */
  compact(request) {
    const config = parseConfig(request.config, { ...DEFAULTS });
    let { first, last } = replaceableRange(request);
    // Cut only where no tool call is separated from its result (the host checks this too).
    const cuts = safeCutPoints(request.entries);
    while (first <= last && !cuts[first]) first += 1;
    while (last >= first && !cuts[last + 1]) last -= 1;
    if (last - first < 1) {
      throw StrategyError.nothingToDo('fewer than two entries to digest between safe cut points');
    }
    const replaced = request.entries.slice(first, last + 1);
    logInfo(`digesting ${replaced.length} entries`);
    return outcome(rangeOf(request.entries, first, last), summaryReplacement(replaced, digest(replaced, config)));
  }
}

export const compact = strategyExport(new Digest());
