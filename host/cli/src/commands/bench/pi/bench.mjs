// Node baseline for `cairn bench`: runs Pi 0.73.1's own compaction-preparation code
// (@mariozechner/pi-coding-agent, pinned in package.json / package-lock.json).
//
//   node bench.mjs cold   FILE                  one cold preparation, end to end from the file
//   node bench.mjs warm   FILE --iterations N   N in-process iterations from the file's text (after 1 warm-up)
//   node bench.mjs replay FILE                  turn-by-turn auto-compaction decisions (+ preparation when triggered)
//   node bench.mjs addon  FILE --iterations N --package DIR --home DIR
//                                               N warm compactions by Cairn's Node addon (the package
//                                               `cairn-compaction` in DIR) from the file's text (after 1 warm-up)
//
// Prints exactly one JSON line on stdout; errors go to stderr with a non-zero exit code.
// Only Pi is used (no other dependencies). The session file is never written.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";

// --- Imports -----------------------------------------------------------------------------------
// The package's `exports` map only exposes "." and "./hooks", and the root index costs ~3 s to load
// (TUI, providers, ...). `prepareCompaction`, `estimateContextTokens` and `loadEntriesFromFile` are
// not re-exported from the root anyway. So we resolve the root entry (dist/index.js) and import the
// deep modules by file URL; these are the same module instances the root re-exports:
//   dist/core/compaction/compaction.js : prepareCompaction, estimateContextTokens, calculateContextTokens,
//                                        shouldCompact, DEFAULT_COMPACTION_SETTINGS
//   dist/core/compaction/utils.js      : serializeConversation
//   dist/core/session-manager.js       : loadEntriesFromFile, parseSessionEntries, migrateSessionEntries,
//                                        buildSessionContext, getLatestCompactionEntry, SessionManager
//   dist/core/messages.js              : convertToLlm
// Import time is NOT part of any reported timing.
const PI_ROOT = import.meta.resolve("@mariozechner/pi-coding-agent");
const [C, U, SM, M] = await Promise.all([
  import(new URL("./core/compaction/compaction.js", PI_ROOT).href),
  import(new URL("./core/compaction/utils.js", PI_ROOT).href),
  import(new URL("./core/session-manager.js", PI_ROOT).href),
  import(new URL("./core/messages.js", PI_ROOT).href),
]);
const {
  prepareCompaction,
  estimateContextTokens,
  calculateContextTokens,
  shouldCompact,
  DEFAULT_COMPACTION_SETTINGS,
} = C;
const { serializeConversation } = U;
const {
  loadEntriesFromFile,
  parseSessionEntries,
  migrateSessionEntries,
  buildSessionContext,
  getLatestCompactionEntry,
  SessionManager,
} = SM;
const { convertToLlm } = M;

const CONTEXT_WINDOW = 128000;
const SETTINGS = DEFAULT_COMPACTION_SETTINGS; // {enabled:true, reserveTokens:16384, keepRecentTokens:20000}

// --- Pi's session-open path, without SessionManager.open (which rewrites v1/v2 files in place) ---

// What SessionManager.setSessionFile() does after reading: migrate to v3 in place, then _buildIndex()
// (byId map, leaf = last non-header entry). We run Pi's own _buildIndex()/getBranch() on an in-memory
// (non-persisting) SessionManager, so the branch is exactly what `sessionManager.getBranch()` returns
// in agent-session.js before `prepareCompaction(pathEntries, settings)`.
function branchFromFileEntries(fileEntries, file) {
  if (fileEntries.length === 0) throw new Error(`${file}: no session entries (file missing, empty, or invalid session header)`);
  migrateSessionEntries(fileEntries); // v1 -> v2 -> v3, mutates in place (v1 gets random 8-hex ids)
  const sm = SessionManager.inMemory("/");
  sm.fileEntries = fileEntries;
  sm._buildIndex();
  return sm.getBranch(); // leaf -> root walk via parentId, returned in root..leaf order
}

// What compact() hands to the model (generateSummary / generateTurnPrefixSummary):
// serializeConversation(convertToLlm(messages)), one call for the history, one for the split-turn prefix.
function serializePreparation(prep) {
  let chars = serializeConversation(convertToLlm(prep.messagesToSummarize)).length;
  if (prep.isSplitTurn && prep.turnPrefixMessages.length > 0) {
    chars += serializeConversation(convertToLlm(prep.turnPrefixMessages)).length;
  }
  return chars;
}

function prepareAndSerialize(branch) {
  const prep = prepareCompaction(branch, SETTINGS);
  const serializedChars = prep ? serializePreparation(prep) : 0;
  return { prep, serializedChars };
}

// --- Modes ---------------------------------------------------------------------------------------

function cold(file) {
  const t0 = performance.now();
  const fileEntries = loadEntriesFromFile(file); // readFileSync + JSON.parse per line + header check
  const branch = branchFromFileEntries(fileEntries, file);
  const { prep, serializedChars } = prepareAndSerialize(branch);
  const ms = performance.now() - t0;
  const firstKeptIndex = prep ? branch.findIndex((e) => e.id === prep.firstKeptEntryId) : null;
  return {
    mode: "cold",
    ms: round(ms),
    tokens_before: prep ? prep.tokensBefore : null,
    messages_to_summarize: prep ? prep.messagesToSummarize.length : 0,
    turn_prefix_messages: prep ? prep.turnPrefixMessages.length : 0,
    serialized_chars: serializedChars,
    first_kept_entry_id: prep ? prep.firstKeptEntryId : null,
    // v1 sessions get random ids on migration, so the index into the branch is the stable value.
    first_kept_entry_index: firstKeptIndex,
    branch_entries: branch.length,
    // VmHWM is this process's own peak: getrusage's maxRSS also counts the parent's pages at
    // fork, so it overstates a child of a large parent.
    rss_peak_mb: round(peakRssKiB() / 1024),
  };
}

function warm(file, iterations) {
  const text = readFileSync(file, "utf8");
  const once = () => {
    // Same work as cold, from the text in memory. parseSessionEntries is loadEntriesFromFile's
    // parse loop without the file read; the header check is kept so the work is identical.
    const fileEntries = parseSessionEntries(text);
    if (fileEntries[0]?.type !== "session" || typeof fileEntries[0].id !== "string") {
      throw new Error("invalid session header");
    }
    const branch = branchFromFileEntries(fileEntries, file);
    return prepareAndSerialize(branch).serializedChars;
  };
  let sink = once(); // warm-up
  const samples = new Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    sink ^= once();
    samples[i] = performance.now() - t0;
  }
  globalThis.__sink = sink; // keep the result observable
  samples.sort((a, b) => a - b);
  const mean = samples.reduce((a, b) => a + b, 0) / iterations;
  return {
    mode: "warm",
    iterations,
    p50_ms: round(percentile(samples, 50)),
    p99_ms: round(percentile(samples, 99)),
    mean_ms: round(mean),
  };
}

// Cairn's side, as a TypeScript harness runs it in-process: Host.compact of the session's text
// (parsed, compacted and answered in Rust on a libuv worker), a fresh conversation per call.
async function addon(file, iterations, pkg, home) {
  const { Host } = createRequire(import.meta.url)(pkg);
  const host = new Host({ home });
  const text = readFileSync(file, "utf8");
  const samples = [];
  for (let i = 0; i <= iterations; i++) {
    const t0 = performance.now();
    const answer = await host.compact(`addon-${i}`, text);
    if (!answer.committed) throw new Error(`the addon's compaction committed nothing: ${answer.not_committed}`);
    if (i > 0) samples.push(performance.now() - t0); // the first warms caches
  }
  samples.sort((a, b) => a - b);
  return { mode: "addon", iterations, p50_ms: round(percentile(samples, 50)), p99_ms: round(percentile(samples, 99)) };
}

// Pi's auto-compaction decision at a turn boundary: AgentSession._checkCompaction(lastAssistant, false),
// the pre-prompt check that runs before each new user message (agent-session.js), on
// agent.state.messages, which after load is buildSessionContext(branch).messages.
// (The overflow case needs a live model + isContextOverflow and is not reproduced; no transcript
// message here is a context-overflow error.)
function contextTokensForDecision(prefix) {
  const messages = buildSessionContext(prefix).messages;
  let lastAssistant;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role === "assistant") {
      lastAssistant = messages[i];
      break;
    }
  }
  if (!lastAssistant) return null; // Pi only checks when there is an assistant message
  const compactionEntry = getLatestCompactionEntry(prefix);
  if (compactionEntry !== null && lastAssistant.timestamp <= new Date(compactionEntry.timestamp).getTime()) {
    return null; // stale pre-compaction usage
  }
  if (lastAssistant.stopReason === "error") {
    const estimate = estimateContextTokens(messages);
    if (estimate.lastUsageIndex === null) return null;
    const usageMsg = messages[estimate.lastUsageIndex];
    if (compactionEntry && usageMsg.role === "assistant" &&
        usageMsg.timestamp <= new Date(compactionEntry.timestamp).getTime()) {
      return null;
    }
    return estimate.tokens;
  }
  return calculateContextTokens(lastAssistant.usage);
}

function replay(file) {
  const branch = branchFromFileEntries(loadEntriesFromFile(file), file); // load is not timed
  // Turn boundaries: just before every user message (each starts a turn), and the end of the branch.
  const ends = [];
  for (let i = 1; i < branch.length; i++) {
    const e = branch[i];
    if (e.type === "message" && e.message.role === "user") ends.push(i);
  }
  ends.push(branch.length);

  let decisions = 0;
  let prepared = 0;
  const t0 = performance.now();
  for (const end of ends) {
    const prefix = branch.slice(0, end);
    const tokens = contextTokensForDecision(prefix);
    if (tokens !== null && shouldCompact(tokens, CONTEXT_WINDOW, SETTINGS)) {
      decisions++;
      // _runAutoCompaction: prepareCompaction(sessionManager.getBranch(), settings); no LLM call.
      if (prepareCompaction(prefix, SETTINGS)) prepared++;
    }
    // Continue from the uncompacted prefix (no compaction entry is inserted).
  }
  const totalMs = performance.now() - t0;
  return {
    mode: "replay",
    turns: ends.length,
    compactions_prepared: prepared,
    compact_decisions: decisions,
    total_ms: round(totalMs),
  };
}

// --- Helpers / CLI -------------------------------------------------------------------------------

function percentile(sorted, p) {
  // nearest-rank
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

function round(x) {
  return Math.round(x * 1000) / 1000;
}

function usage() {
  return "usage: node bench.mjs cold FILE | warm FILE --iterations N | replay FILE | addon FILE --iterations N --package DIR --home DIR";
}

/** `--name value` options of a mode; `names` are the ones it takes. */
function options(rest, names) {
  const out = {};
  for (let i = 0; i < rest.length; i++) {
    const [flag, inline] = rest[i].split(/=(.*)/s);
    const name = flag.replace(/^--/, "");
    if (!flag.startsWith("--") || !names.includes(name)) throw new Error(usage());
    out[name] = inline ?? rest[++i];
    if (out[name] === undefined) throw new Error(usage());
  }
  return out;
}

function iterationsOf(opts) {
  const iterations = opts.iterations === undefined ? 20 : Number(opts.iterations);
  if (!Number.isInteger(iterations) || iterations < 1) throw new Error("--iterations must be a positive integer");
  return iterations;
}

async function main(argv) {
  const [mode, file, ...rest] = argv;
  if (!mode || !file) throw new Error(usage());
  let out;
  switch (mode) {
    case "cold":
      if (rest.length) throw new Error(usage());
      out = cold(file);
      break;
    case "warm":
      out = warm(file, iterationsOf(options(rest, ["iterations"])));
      break;
    case "replay":
      if (rest.length) throw new Error(usage());
      out = replay(file);
      break;
    case "addon": {
      const opts = options(rest, ["iterations", "package", "home"]);
      if (!opts.package || !opts.home) throw new Error(usage());
      out = await addon(file, iterationsOf(opts), opts.package, opts.home);
      break;
    }
    default:
      throw new Error(usage());
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

try {
  await main(process.argv.slice(2));
} catch (err) {
  process.stderr.write(`bench.mjs: ${err?.stack ?? err}\n`);
  process.exitCode = 1;
}

/** This process's peak resident set (KiB) from /proc/self/status, else getrusage's. */
function peakRssKiB() {
  try {
    const line = readFileSync("/proc/self/status", "utf8").split("\n").find((l) => l.startsWith("VmHWM:"));
    if (line) return Number(line.split(/\s+/)[1]);
  } catch {}
  return process.resourceUsage().maxRSS;
}
