// @cairn/sdk: write Cairn compaction plugins (strategy, trigger, commit policy) in JavaScript.
// See README.md. Test helpers live in `@cairn/sdk/testing`; the build in `bin/cairn-js-build.mjs`.

/** @typedef {import('./src/conversation.js').CompactRequest} CompactRequest what `compact` gets: the request with every entry */
/** @typedef {import('./src/conversation.js').LentRequest} LentRequest what `compactLent` gets: the request without entries */
/** @typedef {import('./src/conversation.js').Outcome} Outcome a strategy's outcome: entries, and `original(i)` from `compactLent` */

export { SEED_MESSAGES, SEED_MESSAGE_CHARS, charCount, clipChars, entryText, placeholderText, safeCutPoints, thousands } from './src/rules.js';
export { ArchiveError, ModelError, StrategyError } from './src/errors.js';
export { guardSandbox, noClockMessage } from './src/sandbox.js';
export { History, original, outline, partText } from './src/conversation.js';
export {
  CommitDecision,
  TriggerDecision,
  askModel,
  askModelOrFallback,
  clipEllipsis,
  configOrDefaults,
  countTokens,
  isOperatorMessage,
  log,
  logDebug,
  logError,
  logInfo,
  logWarn,
  messageText,
  modelUnavailable,
  outcome,
  pageArchive,
  parseConfig,
  pendingRequestDecision,
  putArtifact,
  rangeOf,
  readArchiveSummary,
  recount,
  replaceableRange,
  searchArchive,
  summaryEntry,
  summaryReplacement,
  tailChars,
  toolCalls,
  triggerConfig,
} from './src/helpers.js';
export { CommitPolicy, Strategy, Trigger, asStrategyError, commitPolicyExport, strategyExport, triggerExport } from './src/plugin.js';
export { capability, hasCapability, installHost } from './src/host.js';
