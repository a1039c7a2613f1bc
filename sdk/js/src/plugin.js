// One base class per world, with the Rust SDK's defaults, and the functions that turn a plugin
// object into the component's export. A plugin module ends with, e.g.:
//
//   export const decide = commitPolicyExport(new MyPolicy());
//
// and `cairn-js-build` makes that function the component's `decide`.

import { History, compactWithEveryEntry, lend, toWire, wholeEntries } from './conversation.js';
import { ArchiveError, ModelError, StrategyError } from './errors.js';
import { CommitDecision, TriggerDecision, logError, modelUnavailable } from './helpers.js';
import { firstOwnFrame, mapStack } from './stack.js';

/** @typedef {import('./conversation.js').CompactRequest} CompactRequest */
/** @typedef {import('./conversation.js').LentRequest} LentRequest */
/** @typedef {import('./conversation.js').Outcome} Outcome */
/** @typedef {import('./conversation.js').HistorySource} HistorySource */
/** @typedef {import('cairn:compaction/types@0.2.0').Outcome} WireOutcome */
/** @typedef {import('cairn:compaction/types@0.2.0').TriggerInput} TriggerInput */
/** @typedef {import('cairn:compaction/types@0.2.0').TriggerDecision} TriggerDecisionVariant */
/** @typedef {import('cairn:compaction/types@0.2.0').Boundary} Boundary */
/** @typedef {import('cairn:compaction/types@0.2.0').Proposal} Proposal */
/** @typedef {import('cairn:compaction/types@0.2.0').CommitDecision} CommitDecisionVariant */

/**
 * What replaces older history. Called with the entries, the protected head and the verbatim tail.
 * A subclass may also define `compactLent(history, request)` (see `strategyExport`) to read only
 * part of the conversation the host lends it.
 */
export class Strategy {
  /**
   * Returns the outcome, or throws a `StrategyError` to say why there is none.
   * @param {CompactRequest} request
   * @returns {Outcome}
   */
  compact(request) {
    void request;
    throw StrategyError.failed('compact is not implemented by this plugin');
  }
}

/** When to act: called at every turn boundary. */
export class Trigger {
  /**
   * @param {TriggerInput} input
   * @returns {TriggerDecisionVariant}
   */
  decide(input) {
    void input;
    return TriggerDecision.none();
  }
}

/** Whether swapping the working context now is safe. */
export class CommitPolicy {
  /**
   * @param {Boundary} boundary
   * @param {Proposal} proposal
   * @returns {CommitDecisionVariant}
   */
  decide(boundary, proposal) {
    void boundary;
    void proposal;
    return CommitDecision.commit();
  }
}

/**
 * An uncaught error in words: the first line names the plugin's own source line where the build
 * left a line table (`at src/index.js:42`), the rest is the stack, mapped the same way.
 * @param {unknown} error
 */
function describe(error) {
  if (error instanceof Error) {
    const stack = error.stack ? mapStack(error.stack) : '';
    const own = error.stack ? firstOwnFrame(error.stack) : undefined;
    return `uncaught ${error.name}: ${error.message}${own ? ` (at ${own})` : ''}${stack ? `\n${stack}` : ''}`;
  }
  return `uncaught ${String(error)}`;
}

/**
 * What a strategy's uncaught exception means for the host. A `StrategyError` is itself; a
 * `ModelError` means no usable model (`unavailable`, as `modelUnavailable` words it); an
 * `ArchiveError` is `unavailable` when the archive was denied or unavailable, else `failed`.
 * Anything else is a bug: logged at error level with its stack, then `failed` with its message,
 * so `cairn compact --json` shows what went wrong (a trap would only say "unreachable").
 * @param {unknown} error
 * @returns {StrategyError}
 */
export function asStrategyError(error) {
  if (error instanceof StrategyError) {
    return error;
  }
  if (error instanceof ModelError) {
    return modelUnavailable(error);
  }
  if (error instanceof ArchiveError) {
    const { variant } = error;
    return variant.tag === 'denied' || variant.tag === 'unavailable'
      ? StrategyError.unavailable(`archive: ${variant.val}`)
      : StrategyError.failed(`archive: ${error.message}`);
  }
  const why = describe(error);
  logError(why);
  return StrategyError.failed(why.split('\n')[0]);
}

/**
 * A strategy that reads the lent conversation itself.
 * @typedef {object} LentStrategy
 * @property {(history: History, request: LentRequest) => Outcome} compactLent
 */

/**
 * The `compact(history, request)` export of a strategy: the outcome on the wire, or the
 * contract's error variant for whatever the plugin threw (see `asStrategyError`).
 *
 * - When `plugin.compactLent(history, request)` is defined it is called with the lent
 *   conversation (a `History`) and the request without entries; its outcome's replacement may
 *   mix entries and `original(i)`.
 * - Otherwise every entry is read in one batch, `plugin.compact(request)` gets them in
 *   `request.entries`, and each replacement entry equal to the original of its id is sent back as
 *   `original(i)`: unchanged entries do not cross back.
 *
 * Called with one argument, a request holding its `entries`, it is contract 0.1.0's
 * `compact(request)`: the outcome holds whole entries (an `original(i)` of `compactLent` becomes
 * `request.entries[i]`). Strategy components are built for that shape for now (see
 * `bin/cairn-js-build.mjs`), and tests call it so.
 * @param {Strategy & Partial<LentStrategy>} plugin
 * @returns {{ (history: HistorySource, request: LentRequest): WireOutcome, (request: CompactRequest): Outcome }}
 */
export function strategyExport(plugin) {
  /** @type {(first: HistorySource | CompactRequest, request?: LentRequest) => WireOutcome | Outcome} */
  const compact = (first, request) => {
    try {
      if (request === undefined) {
        const whole = /** @type {CompactRequest} */ (first);
        return plugin.compactLent ? wholeEntries(plugin.compactLent(...lend(whole)), whole.entries) : plugin.compact(whole);
      }
      const history = new History(/** @type {HistorySource} */ (first));
      return plugin.compactLent ? toWire(plugin.compactLent(history, request)) : compactWithEveryEntry(history, request, (r) => plugin.compact(r));
    } catch (error) {
      // The component runtime turns a thrown variant into `err(variant)`.
      throw asStrategyError(error).toVariant();
    }
  };
  // One function with two call shapes: an arrow cannot be checked against an overload set.
  return /** @type {any} */ (compact);
}

/**
 * Logs an exception from a trigger or commit policy and throws it on: these worlds have no error
 * channel, so the call traps and the host falls back to its own rule (and says so in a notice).
 * @template {unknown[]} A
 * @template R
 * @param {(...args: A) => R} decide
 * @returns {(...args: A) => R}
 */
function logged(decide) {
  return (...args) => {
    try {
      return decide(...args);
    } catch (error) {
      logError(describe(error));
      throw error;
    }
  };
}

/**
 * The `decide` export of a trigger.
 * @param {Trigger} plugin
 * @returns {(input: TriggerInput) => TriggerDecisionVariant}
 */
export function triggerExport(plugin) {
  return logged((input) => plugin.decide(input));
}

/**
 * The `decide` export of a commit policy.
 * @param {CommitPolicy} plugin
 * @returns {(boundary: Boundary, proposal: Proposal) => CommitDecisionVariant}
 */
export function commitPolicyExport(plugin) {
  return logged((boundary, proposal) => plugin.decide(boundary, proposal));
}
