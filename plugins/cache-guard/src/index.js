// cache-guard: a commit policy for agents behind a provider prompt cache.
//
// Between compactions the working context is a stable prefix that the provider caches: every
// request reads it at the cached-input price. A swap replaces that prefix, so the next request
// writes the new, shorter context to the cache at the cache-write price, and only later requests
// read the shorter context cheaply. Over H = `horizon_turns` turns (a turn: one model request
// reading the context), with B = tokens before, A = tokens after, c = cached-input price and
// w = cache-write price:
//
//   keep the cache:  H·B·c
//   swap:            A·w + (H−1)·A·c
//
// so the swap pays for itself exactly when H·(B−A)·c > A·(w−c): the saving on cached reads over
// the horizon exceeds the premium of rewriting the cache. It then commits; otherwise it defers
// with the numbers and the break-even turn. Past `hard_limit_tokens` it commits whatever the
// price, since the window matters more than the bill. Like `commit-turn-boundary` it defers while
// a tool call runs or the turn is incomplete, and rejects an outcome that leaves an earlier
// compaction summary in the kept range.

import { CommitDecision, CommitPolicy, commitPolicyExport, logInfo, logWarn, parseConfig, thousands } from '@cairn/sdk';

/** @typedef {import('cairn:compaction/types@0.2.0').Boundary} Boundary */
/** @typedef {import('cairn:compaction/types@0.2.0').Proposal} Proposal */
/** @typedef {import('cairn:compaction/types@0.2.0').CommitDecision} Decision */

/**
 * Prices are USD per million tokens. The defaults are Anthropic's list prices for Claude Sonnet
 * (4 / 4.5): input $3, cache hits (cached input) $0.30, 5-minute cache writes $3.75.
 */
export const DEFAULTS = Object.freeze({
  /** Uncached input. A provider with no write surcharge bills the rewrite at this price. */
  input: 3.0,
  /** Reading the cached prefix. */
  cached_input: 0.3,
  /** Writing the prefix to the cache (0 or ≤ `input` for providers with no write surcharge). */
  cache_write: 3.75,
  /** Turns (model requests) expected to reuse the new cache before the next compaction or cache expiry. */
  horizon_turns: 20,
  /**
   * From this context size a swap commits whatever the price. No window reaches a commit policy,
   * so the default suits the smallest common windows (about 78% of 128k); raise it for larger ones.
   */
  hard_limit_tokens: 100_000,
});

/** @typedef {{ -readonly [K in keyof typeof DEFAULTS]: number }} Config */

/** Ids named in a rejection, at most; the rest are counted. */
const MAX_IDS = 10;

/**
 * The config from the policy's JSON; throws an error starting `config:` when it is broken:
 * unknown keys, wrong types, or values that make the economics meaningless.
 * @param {string} text
 * @returns {Config}
 */
export function loadConfig(text) {
  /** @type {Config} */
  const config = parseConfig(text, { ...DEFAULTS });
  for (const key of /** @type {const} */ (['input', 'cached_input', 'cache_write'])) {
    if (config[key] < 0) {
      throw new RangeError(`config: ${key} is a price per million tokens, not ${config[key]}`);
    }
  }
  for (const key of /** @type {const} */ (['horizon_turns', 'hard_limit_tokens'])) {
    if (!Number.isInteger(config[key]) || config[key] < 1) {
      throw new RangeError(`config: ${key} must be a whole number of at least 1, not ${config[key]}`);
    }
  }
  return config;
}

/** `$0.2037`: four decimals, enough for the cost of one turn. @param {number} usd */
const dollars = (usd) => `$${usd.toFixed(4)}`;

/**
 * What a swap costs and saves under `config`, in USD.
 * @param {Proposal} proposal
 * @param {Config} config
 */
export function swapEconomics(proposal, config) {
  const before = proposal.tokensBefore;
  const after = proposal.tokensAfter;
  const cached = config.cached_input / 1e6;
  // The first turn after a swap pays at least the uncached input price for the new prefix.
  const write = Math.max(config.cache_write, config.input) / 1e6;
  /** Saved on every turn that reads the shorter prefix from the cache. */
  const savingPerTurn = Math.max(0, before - after) * cached;
  /** What rewriting the cache costs beyond reading the same prefix from it. */
  const rewritePremium = after * (write - cached);
  /** The first turn by which the swap has paid for itself; Infinity when it never does. */
  const breakEven = rewritePremium <= 0 ? 1 : savingPerTurn > 0 ? Math.floor(rewritePremium / savingPerTurn) + 1 : Infinity;
  return { savingPerTurn, rewritePremium, breakEven, pays: breakEven <= config.horizon_turns };
}

/** `a, b, c` or `a, …, j and 3 more`. @param {string[]} ids */
function idList(ids) {
  const shown = ids.slice(0, MAX_IDS).join(', ');
  return ids.length > MAX_IDS ? `${shown} and ${ids.length - MAX_IDS} more` : shown;
}

/**
 * The whole rule, free of host calls. `config` is null when the policy's config is broken: then
 * no swap is deferred for its price (see `CacheGuard`).
 * @param {Boundary} boundary
 * @param {Proposal} proposal
 * @param {Config | null} config
 * @returns {Decision}
 */
export function rule(boundary, proposal, config) {
  if (boundary.toolCallOutstanding) {
    return CommitDecision.defer('a tool call is still running');
  }
  if (!boundary.turnComplete) {
    return CommitDecision.defer('the turn is not complete');
  }
  if (proposal.keptSummaryIds.length > 0) {
    return CommitDecision.reject(`a stale compaction entry would stay in the kept range: ${idList(proposal.keptSummaryIds)}`);
  }
  // The host asks once before running any strategy (no strategy, nothing replaced, no size
  // after): there is no swap to price yet, so only the boundary counts.
  const preflight = proposal.strategy === '' && proposal.replacedIds.length === 0;
  if (config === null || preflight || proposal.tokensBefore >= config.hard_limit_tokens) {
    return CommitDecision.commit();
  }
  if (proposal.tokensAfter >= proposal.tokensBefore) {
    return CommitDecision.defer(`the swap frees nothing (${thousands(proposal.tokensBefore)} → ${thousands(proposal.tokensAfter)} tokens)`);
  }
  const swap = swapEconomics(proposal, config);
  if (swap.pays) {
    return CommitDecision.commit();
  }
  const when = Number.isFinite(swap.breakEven) ? `breaks even only at turn ${swap.breakEven}` : 'never breaks even';
  return CommitDecision.defer(
    `keeping the warm prompt cache is cheaper: swapping ${thousands(proposal.tokensBefore)} → ${thousands(proposal.tokensAfter)} tokens ` +
      `saves ${dollars(swap.savingPerTurn)} a turn in cached reads but costs ${dollars(swap.rewritePremium)} more to rewrite the cache; ` +
      `it ${when}, past the ${config.horizon_turns}-turn horizon (commits anyway from ${thousands(config.hard_limit_tokens)} tokens)`,
  );
}

/** The commit policy: the rule, with the config read per call and its choices logged. */
export class CacheGuard extends CommitPolicy {
  /**
   * @param {Boundary} boundary
   * @param {Proposal} proposal
   * @returns {Decision}
   */
  decide(boundary, proposal) {
    /** @type {Config | null} */
    let config = null;
    try {
      config = loadConfig(boundary.config);
    } catch (error) {
      // A broken config must not hold compaction back: without trustworthy prices the guard
      // only keeps the boundary rules and commits as `commit-turn-boundary` would.
      logWarn(`${error instanceof Error ? error.message : String(error)}; cache-guard defers no swap for its price until the config is fixed`);
    }
    const decision = rule(boundary, proposal, config);
    if (config !== null && decision.tag === 'commit' && proposal.strategy !== '') {
      logInfo(commitNote(proposal, config));
    }
    return decision;
  }
}

/**
 * Why a priced swap commits, for the log.
 * @param {Proposal} proposal
 * @param {Config} config
 */
function commitNote(proposal, config) {
  const swap = `swap ${thousands(proposal.tokensBefore)} → ${thousands(proposal.tokensAfter)} tokens by ${proposal.strategy}`;
  if (proposal.tokensBefore >= config.hard_limit_tokens) {
    return `${swap}: past the hard limit of ${thousands(config.hard_limit_tokens)} tokens, committing whatever the cache costs`;
  }
  const { savingPerTurn, rewritePremium, breakEven } = swapEconomics(proposal, config);
  return `${swap}: pays for its ${dollars(rewritePremium)} cache rewrite at ${dollars(savingPerTurn)} a turn by turn ${breakEven} of the ${config.horizon_turns}-turn horizon`;
}

export const decide = commitPolicyExport(new CacheGuard());
