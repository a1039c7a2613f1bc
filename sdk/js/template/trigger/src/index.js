// {{name}}: when to act. An agent's own request wins (once any cooldown is over); otherwise
// compact once the context passes `compact_at` of the window. Unknown usage never starts anything.

import { Trigger, TriggerDecision, pendingRequestDecision, thousands, triggerConfig, triggerExport } from '@cairn/sdk';

/** @typedef {import('cairn:compaction/types@0.2.0').TriggerInput} TriggerInput */
/** @typedef {import('cairn:compaction/types@0.2.0').TriggerDecision} Decision */

export const DEFAULTS = Object.freeze({
  /** Share of the window from which to compact. */
  compact_at: 0.8,
});

/**
 * The whole rule, free of host calls.
 * @param {TriggerInput} input
 * @param {{ compact_at: number }} config
 * @returns {Decision}
 */
export function rule(input, config) {
  const { contextTokens, window } = input.usage;
  const known = contextTokens !== null && contextTokens !== undefined && window > 0;
  const context = known ? `context at ${Math.floor((contextTokens * 100) / window)}% of the window` : null;
  const requested = pendingRequestDecision(input, context);
  if (requested) {
    return requested;
  }
  if (!known || input.cooldownLeft > 0) {
    return TriggerDecision.none();
  }
  if (contextTokens >= config.compact_at * window) {
    return TriggerDecision.compact(`${context} (${thousands(contextTokens)} of ${thousands(window)} tokens)`);
  }
  return TriggerDecision.none();
}

export class ShareOfWindow extends Trigger {
  /**
   * @param {TriggerInput} input
   * @returns {Decision}
   */
  decide(input) {
    // A broken config must not stop maintenance: it is logged and the defaults apply.
    return rule(input, triggerConfig(input.config, { ...DEFAULTS }));
  }
}

export const decide = triggerExport(new ShareOfWindow());
