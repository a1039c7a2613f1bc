// {{name}}: whether to swap the working context now. Never while a tool call runs or a turn is
// unfinished (defer: try again at a later boundary), and never for an outcome that frees less than
// `min_freed_share` of the context (reject: the chain's next step may free more).

import { CommitDecision, CommitPolicy, commitPolicyExport, thousands, triggerConfig } from '@cairn/sdk';

/** @typedef {import('cairn:compaction/types@0.2.0').Boundary} Boundary */
/** @typedef {import('cairn:compaction/types@0.2.0').Proposal} Proposal */
/** @typedef {import('cairn:compaction/types@0.2.0').CommitDecision} Decision */

export const DEFAULTS = Object.freeze({
  /** The least share of the context an outcome must free to be worth a swap. */
  min_freed_share: 0.1,
});

/**
 * The whole rule, free of host calls.
 * @param {Boundary} boundary
 * @param {Proposal} proposal
 * @param {{ min_freed_share: number }} config
 * @returns {Decision}
 */
export function rule(boundary, proposal, config) {
  if (boundary.toolCallOutstanding) {
    return CommitDecision.defer('a tool call is still running');
  }
  if (!boundary.turnComplete) {
    return CommitDecision.defer('the turn is not complete');
  }
  // Before running any strategy the host asks with no strategy and nothing replaced yet.
  if (proposal.strategy === '' && proposal.replacedIds.length === 0) {
    return CommitDecision.commit();
  }
  const freed = Math.max(0, proposal.tokensBefore - proposal.tokensAfter);
  if (freed < config.min_freed_share * proposal.tokensBefore) {
    const share = proposal.tokensBefore > 0 ? Math.floor((freed * 100) / proposal.tokensBefore) : 0;
    return CommitDecision.reject(
      `frees only ${thousands(freed)} of ${thousands(proposal.tokensBefore)} tokens (${share}%, less than ${Math.round(config.min_freed_share * 100)}%)`,
    );
  }
  return CommitDecision.commit();
}

export class WorthASwap extends CommitPolicy {
  /**
   * @param {Boundary} boundary
   * @param {Proposal} proposal
   * @returns {Decision}
   */
  decide(boundary, proposal) {
    return rule(boundary, proposal, triggerConfig(boundary.config, { ...DEFAULTS }));
  }
}

export const decide = commitPolicyExport(new WorthASwap());
