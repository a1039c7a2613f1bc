'use strict';
// Cairn in-process for Node.js: sandboxed, swappable, auditable context compaction for agent
// harnesses. `Host` runs Cairn's harness API in this process through the Node-API addon (the same
// engine as the `cairn` command this package also installs); every operation is a Promise that
// runs on a libuv worker thread, so the event loop never waits on Cairn.
//
// Messages go in as a transcript in any format Cairn reads: an array of OpenAI chat messages, an
// Anthropic Messages body ({system, messages}), or the text of any session file (Pi, Claude Code,
// Codex, Gemini CLI, OpenCode, Cairn JSONL). The answer's `transcript` comes back in the same
// shape: an array or object for an array or object, text for text.

const native = require('./native.js');

/** A failed Cairn call. `code` is the stable machine code; the message says what. */
class CairnError extends Error {
  constructor(message) {
    super(message);
    this.name = new.target.name;
  }
}
CairnError.prototype.code = 'internal';

function errorClass(name, code) {
  const cls = { [name]: class extends CairnError {} }[name];
  cls.prototype.code = code;
  return cls;
}

const InvalidRequest = errorClass('InvalidRequest', 'invalid-request');
const Forbidden = errorClass('Forbidden', 'forbidden');
const NotFound = errorClass('NotFound', 'not-found');
const Diverged = errorClass('Diverged', 'diverged');
const TranscriptInvalid = errorClass('TranscriptInvalid', 'transcript-invalid');
const Refused = errorClass('Refused', 'refused');
const Unavailable = errorClass('Unavailable', 'unavailable');
const Internal = errorClass('Internal', 'internal');
const PolicyInvalid = errorClass('PolicyInvalid', 'policy-invalid');
const PluginsInvalid = errorClass('PluginsInvalid', 'plugins-invalid');
const HomeUnavailable = errorClass('HomeUnavailable', 'home-unavailable');

const BY_CODE = Object.fromEntries(
  [InvalidRequest, Forbidden, NotFound, Diverged, TranscriptInvalid, Refused, Unavailable, Internal, PolicyInvalid, PluginsInvalid, HomeUnavailable].map((cls) => [cls.prototype.code, cls]),
);

function raised(code, message) {
  return new (BY_CODE[code] || Internal)(message);
}

const text = (messages) => (typeof messages === 'string' ? messages : JSON.stringify(messages));

/** The answer's transcript in the shape the caller sent (an array or object back for one). */
function shaped(answer, sent) {
  if (sent != null && typeof sent !== 'string' && typeof answer.transcript === 'string' && answer.transcript) {
    answer.transcript = JSON.parse(answer.transcript);
  }
  return answer;
}

/** The request without absent fields (the harness API's defaults apply). */
function request(fields) {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined && value !== null));
}

/** A Cairn host in this process: its plugins compiled once, its policy, its home. */
class Host {
  /**
   * `home` defaults to $CAIRN_HOME, else ~/.local/share/cairn (a postgres:// URL is a PostgreSQL
   * record); `policy` is a TOML policy file (the embedded default when absent); `pluginDirs` add
   * plugins beside the bundled ones. Throws PolicyInvalid, PluginsInvalid or HomeUnavailable.
   */
  constructor({ home, policy, pluginDirs } = {}) {
    try {
      this.native = new native.NativeHost(home, policy, pluginDirs || []);
    } catch (error) {
      throw BY_CODE[error.code] ? raised(error.code, error.message) : error;
    }
  }

  /** Any operation by name (`OPERATIONS`, the names of `cairn serve`'s tools); the answer. */
  async call(operation, fields) {
    const outcome = await this.native.call(operation, JSON.stringify(fields));
    if (outcome.code) throw raised(outcome.code, outcome.message);
    return JSON.parse(outcome.answer);
  }

  /** Compacts `messages` now under the policy and records it: the report, and the new context
   * as `transcript` in the shape sent. */
  async compact(conversation, messages, { window, budget, preserve, resume, dryRun } = {}) {
    const answer = await this.call('compact', request({ conversation, transcript: text(messages), window, budget, preserve, resume, dry_run: dryRun }));
    return shaped(answer, messages);
  }

  /** Archives the conversation and answers the seed of a fresh session. */
  async handover(conversation, messages, { preserve, resume } = {}) {
    return shaped(await this.call('handover', request({ conversation, transcript: text(messages), preserve, resume })), messages);
  }

  /** A turn boundary: the trigger, commit policy and chain decide. With `since` (the previous
   * answer's `acknowledged`), `messages` holds only what was appended since; Diverged means:
   * send the whole history once. */
  async boundary(conversation, messages, options) {
    const { turn, window, reserve, since, format, usage, toolCallOutstanding, turnComplete, dryRun, includeTranscript } = options;
    const fields = request({
      conversation,
      transcript: text(messages),
      turn,
      window,
      reserve,
      since,
      format,
      usage,
      tool_call_outstanding: toolCallOutstanding,
      turn_complete: turnComplete,
      dry_run: dryRun,
      include_transcript: includeTranscript,
    });
    return shaped(await this.call('boundary', fields), messages);
  }

  /** What the agent's `session_history` tool reads: `summary`, `search` ({query}), `page`
   * ({archive_id}) or `artifact` ({uri}). */
  async history(conversation, action = 'summary', fields = {}) {
    return this.call('history', { conversation, action, ...fields });
  }

  /** The conversation's timeline, or one compaction part by part. */
  async show(conversation, archiveId) {
    return this.call('show', request({ conversation, archive_id: archiveId }));
  }

  /** Takes back a compaction (default the latest) and every later one: the restored context as
   * `transcript`, in the shape of `messages` when given. */
  async undo(conversation, { archiveId, messages } = {}) {
    const fields = request({ conversation, archive_id: archiveId, transcript: messages === undefined ? undefined : text(messages) });
    return shaped(await this.call('undo', fields), messages);
  }

  /** Pins entries by id (within the policy's pin budget); the ids pinned now. */
  async pin(conversation, ids) {
    return (await this.call('pin', { conversation, ids })).pinned;
  }

  /** Unpins entries; the ids pinned now. */
  async unpin(conversation, ids) {
    return (await this.call('unpin', { conversation, ids })).pinned;
  }

  /** Notices not yet acknowledged, oldest first. */
  async notices(conversation) {
    return (await this.call('notices_take', { conversation })).notices;
  }

  /** Acknowledges notices: they are not delivered again. */
  async acknowledge(conversation, ids) {
    return (await this.call('notices_ack', { conversation, ids })).acknowledged;
  }

  /** Records an agent's request (`compact` or `handover`) for the next allowed boundary. */
  async request(conversation, kind, { preserve = '', resume = '' } = {}) {
    return this.call('request', { conversation, kind, preserve, resume });
  }

  /** The stored original behind an `artifact://` URI. */
  async artifact(uri) {
    return (await this.call('artifact_get', { uri })).content;
  }
}

module.exports = {
  Host,
  CairnError,
  InvalidRequest,
  Forbidden,
  NotFound,
  Diverged,
  TranscriptInvalid,
  Refused,
  Unavailable,
  Internal,
  PolicyInvalid,
  PluginsInvalid,
  HomeUnavailable,
  OPERATIONS: Object.freeze(native.operations()),
  ERROR_CODES: Object.freeze(native.errorCodes()),
  version: native.version(),
};
