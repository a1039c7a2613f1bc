// Errors a plugin throws and the SDK turns into the contract's variants.

/** @typedef {import('cairn:compaction/types@0.2.0').StrategyError} StrategyErrorVariant */
/** @typedef {import('cairn:compaction/model@0.2.0').ModelError} ModelErrorVariant */
/** @typedef {import('cairn:compaction/archive@0.2.0').ArchiveError} ArchiveErrorVariant */

/**
 * How a strategy says it produced no outcome. Throw it from `compact`; the SDK hands the host the
 * `strategy-error` variant (`unavailable` → outcome `unavailable`, `nothing-to-do` →
 * `no-progress`, `failed` → `invalid`), and the chain moves on to its next step.
 */
export class StrategyError extends Error {
  /**
   * @param {StrategyErrorVariant['tag']} tag
   * @param {string} message
   */
  constructor(tag, message) {
    super(message);
    this.name = 'StrategyError';
    /** @type {StrategyErrorVariant['tag']} */
    this.tag = tag;
  }

  /** A capability the strategy needs is not there (e.g. no model configured). @param {string} why */
  static unavailable(why) {
    return new StrategyError('unavailable', why);
  }

  /** Nothing this strategy can do for this conversation. @param {string} why */
  static nothingToDo(why) {
    return new StrategyError('nothing-to-do', why);
  }

  /** @param {string} why */
  static failed(why) {
    return new StrategyError('failed', why);
  }

  /** The contract's variant. @returns {StrategyErrorVariant} */
  toVariant() {
    return { tag: this.tag, val: this.message };
  }
}

/**
 * A `model.complete` error. `tag` is the `model-error` case; `denied` means the policy does not
 * grant `model` (possible only when the manifest lists it as optional).
 */
export class ModelError extends Error {
  /** @param {ModelErrorVariant} variant */
  constructor(variant) {
    super(variant.tag === 'timeout' ? 'timeout' : `${variant.tag}: ${variant.val}`);
    this.name = 'ModelError';
    /** @type {ModelErrorVariant} */
    this.variant = variant;
  }

  /** @returns {ModelErrorVariant['tag']} */
  get tag() {
    return this.variant.tag;
  }
}

/** An `archive` call's error; `tag` is the `archive-error` case (`denied` when not granted). */
export class ArchiveError extends Error {
  /** @param {ArchiveErrorVariant} variant */
  constructor(variant) {
    super(`${variant.tag}: ${variant.val}`);
    this.name = 'ArchiveError';
    /** @type {ArchiveErrorVariant} */
    this.variant = variant;
  }

  /** @returns {ArchiveErrorVariant['tag']} */
  get tag() {
    return this.variant.tag;
  }
}

/**
 * The error variant a host import threw. The component runtime throws an `Error` whose `payload`
 * is the variant (`{ tag, val }`) when an import returns `err`; a test fake may throw the variant
 * itself. Anything else is not an error answer and is thrown on unchanged.
 * @param {unknown} thrown
 * @returns {{ tag: string, val?: string }}
 */
export function errorVariant(thrown) {
  const candidate = thrown instanceof Error && 'payload' in thrown ? thrown.payload : thrown;
  if (candidate !== null && typeof candidate === 'object' && typeof (/** @type {{tag?: unknown}} */ (candidate).tag) === 'string') {
    return /** @type {{ tag: string, val?: string }} */ (candidate);
  }
  throw thrown;
}
