//! The MCP tools of `cairn serve`, with typed arguments and results (JSON schemas generated
//! from these types), shared by the stdio and HTTP transports. Every result is structured
//! content; a failure is a tool error naming what was wrong. Harness tools name their
//! conversation; agent tools act on the server's own, so a model can never reach another
//! conversation. Over HTTP every call is scoped to its token's tenant: each conversation key,
//! archive, artifact, search and page is resolved inside that tenant's storage only.
//!
//! Storage is reached only from the blocking pool (`locked`, `blocking`): a home may be a
//! PostgreSQL database behind a blocking client, which must never run on an async task.

use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result};
use cairn::lifecycle::{self, AgentRequest, BoundaryReport, RequestKind, Usage};
use cairn::record::{CompactionReport, StepReport};
use cairn::storage::{ArtifactUri, ConversationKey, Credential, Tenant, TokenScope};
use cairn::transcript::{formats, Entry, Origin, Role, Transcript};
use cairn::{Lifecycle, RunOptions};
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{CallToolResult, Extensions, Implementation, ServerCapabilities, ServerConfig, Tool};
use rmcp::{tool, tool_handler, tool_router, ServerHandler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Expose, Generation, Serve};

/// Whose storage a call reaches.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tenancy {
    /// stdio: one client, the home's own (default) tenant.
    Home,
    /// HTTP: the tenant of the request's bearer token, which the auth layer puts in the
    /// request's extensions as a [`Caller`]. A call without one is refused.
    PerRequest,
}

/// The tenant and scope of a request's bearer token: put in the HTTP request's extensions by
/// the auth layer, read back from the `http::request::Parts` rmcp hands each call.
#[derive(Clone)]
pub struct Caller(pub Credential);

/// The tools that act on the whole node, every tenant at once (the policy and plugins all
/// tenants' calls run on): over HTTP only an operator token may call them. Every such tool is
/// named here, and only here.
pub const NODE_WIDE: &[&str] = &["policy_reload", "plugins_list"];

#[derive(Clone)]
pub struct Server {
    serve: Arc<Serve>,
    expose: Expose,
    tenancy: Tenancy,
    /// HTTP: the tenant whose token made this MCP session's first call; a call with another
    /// tenant's token in the same session is refused. One per session (see `for_session`).
    bound: Arc<OnceLock<Tenant>>,
    tool_router: ToolRouter<Self>,
}

/// The server both transports run: the tools `expose` lists, their schemas with standard
/// formats only.
pub fn server(serve: Arc<Serve>, expose: Expose, tenancy: Tenancy) -> Server {
    let tool_router = match expose {
        Expose::Harness => Server::harness_router(),
        Expose::Agent => Server::agent_router() + ToolRouter::new().with_route(session_history()),
        Expose::Recall => ToolRouter::new().with_route(session_history()),
        Expose::All => Server::harness_router() + Server::agent_router() + ToolRouter::new().with_route(session_history()),
    };
    let mut tool_router = tool_router;
    for route in tool_router.map.values_mut() {
        standard_formats(Arc::make_mut(&mut route.attr.input_schema));
        if let Some(output) = route.attr.output_schema.as_mut() {
            standard_formats(Arc::make_mut(output));
        }
    }
    Server { serve, expose, tenancy, bound: Arc::default(), tool_router }
}

impl Server {
    /// The same tools for a new MCP session, bound to no tenant yet.
    pub fn for_session(&self) -> Server {
        Server { bound: Arc::default(), ..self.clone() }
    }

    /// The tenant a call acts for: the home's own over stdio; over HTTP, the one the auth
    /// layer found for the request's token (and the one this session was opened with).
    fn tenant(&self, extensions: &Extensions) -> Result<Tenant, String> {
        match self.tenancy {
            Tenancy::Home => Ok(self.serve.home.tenant().clone()),
            Tenancy::PerRequest => {
                let tenant = caller(extensions).map(|caller| caller.tenant.clone()).ok_or("refused: the request carries no tenant (no verified bearer token)")?;
                let bound = self.bound.get_or_init(|| tenant.clone());
                if *bound != tenant {
                    return Err("refused: this MCP session was opened with another tenant's token".into());
                }
                Ok(tenant)
            }
        }
    }
}

/// The verified token of an HTTP request, as the auth layer left it.
fn caller(extensions: &Extensions) -> Option<&Credential> {
    extensions.get::<axum::http::request::Parts>().and_then(|parts| parts.extensions.get::<Caller>()).map(|caller| &caller.0)
}

/// Refuses a node-wide tool to anyone but an operator (over stdio the local user is one).
fn check_scope(tenancy: Tenancy, tool: &str, extensions: &Extensions) -> Result<(), rmcp::ErrorData> {
    if tenancy == Tenancy::Home || !NODE_WIDE.contains(&tool) {
        return Ok(());
    }
    match caller(extensions) {
        Some(credential) if credential.scope == TokenScope::Operator => Ok(()),
        held => {
            let held = held.map_or("no", |c| c.scope.as_str());
            Err(rmcp::ErrorData::invalid_request(
                format!("forbidden: `{tool}` acts on the whole node and needs a token of scope operator; this request's token has scope {held} (`cairn tokens create --scope operator`)"),
                Some(serde_json::json!({ "tool": tool, "required_scope": "operator" })),
            ))
        }
    }
}

/// `lifecycle` with every key resolved inside `tenant` (the same host, policy and plugins).
fn scoped(lifecycle: &Lifecycle, tenant: &Tenant) -> Lifecycle {
    if lifecycle.home().tenant() == tenant {
        lifecycle.clone()
    } else {
        lifecycle.with_home(lifecycle.home().for_tenant(tenant))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    /// The router's call, after the scope check: a node-wide tool called with a tenant's token
    /// is a JSON-RPC error (`forbidden: …`), not a tool result.
    async fn call_tool(&self, request: rmcp::model::CallToolRequestParams, context: rmcp::service::RequestContext<rmcp::RoleServer>) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        check_scope(self.tenancy, &request.name, &context.extensions)?;
        self.tool_router.call(ToolCallContext::new(self, request, context)).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(Implementation::new("cairn", env!("CARGO_PKG_VERSION"))).with_instructions(instructions(self.expose))
    }
}

/// What the client is told, naming only the tools this exposure lists: agents such as Codex
/// show the instructions to the model verbatim.
fn instructions(expose: Expose) -> &'static str {
    match expose {
        Expose::Agent => {
            "Cairn keeps the full record of this conversation, including what context compaction removed. \
             Call `session_history` to read it back (`summary`, `search` for a word or id, `page` through entries, `artifact` for a set-aside output) \
             before redoing work or asking the user again; `context_maintenance` asks for a compaction or handover at the next safe turn boundary."
        }
        Expose::Recall => {
            "Cairn keeps the full record of this conversation, including what context compaction removed. \
             Call `session_history` to read it back (`summary`, `search` for a word or id, `page` through entries, `artifact` for a set-aside output) \
             before redoing work or asking the user again."
        }
        Expose::Harness => {
            "Cairn compacts this agent's context: call `boundary` at every turn end (or `compact` / `handover` directly); \
             `notices_take` returns what the operator should be told."
        }
        Expose::All => {
            "Cairn compacts this agent's context: the harness calls `boundary` at every turn end (or `compact` / `handover` directly); \
             the agent's `session_history` reads back what compaction set aside, and `context_maintenance` asks for maintenance at the next boundary."
        }
    }
}

// ---- arguments and results ------------------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    /// Conversation key: 1-64 chars of a-z 0-9 - _ . (its record, archive and lock).
    conversation: String,
    /// The session file's text: Pi, Claude Code, Codex or Gemini CLI session JSONL, an OpenCode export, OpenAI or Anthropic JSON, or Cairn JSONL (auto-detected).
    /// Exactly one of `transcript` and `path`.
    transcript: Option<String>,
    /// The session file itself, read by the server instead of `transcript` (no size limit on
    /// the request). Only over stdio, where harness and server share a disk; refused over HTTP.
    path: Option<String>,
    /// What must survive, verbatim.
    preserve: Option<String>,
    /// How to resume afterwards.
    resume: Option<String>,
    /// Return the compacted context as `transcript` [default true]; a harness that applies
    /// `first_kept_entry_id` + `prefix_summary` (Pi) saves the bytes.
    include_transcript: Option<bool>,
    /// The usable context window in tokens (window less output reserve): the result is held
    /// to it, or reported `degraded` with `over_window` saying why nothing could make it fit.
    window: Option<u64>,
    /// The context this compaction may leave, in tokens (overrides the policy's
    /// `compaction.budget_tokens`): the checkpoint, placeholders and verbatim tail share it,
    /// filled by value; `left_out` says what did not fit.
    budget: Option<u64>,
    /// Report what would be committed, writing nothing (no record, no archive) [default false].
    dry_run: Option<bool>,
    /// The context as the agent measured it (`recorded`: the usage its transcript holds, or a
    /// `reported_tokens` figure): what it bills beyond the transcript (system prompt, tool
    /// schemas) is taken off `window` [default "counted": the transcript is all there is].
    usage: Option<UsageArg>,
}

#[derive(Serialize, JsonSchema)]
struct Step {
    plugin: String,
    /// ok, trap, timeout, oom, denied, invalid, invariant, no-progress, unavailable, rejected.
    outcome: String,
    millis: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens_after: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    refused: Vec<String>,
}

/// One compaction or handover.
#[derive(Serialize, JsonSchema)]
struct Report {
    tokens_before: u64,
    tokens_after: u64,
    steps: Vec<Step>,
    /// The plugin whose outcome was committed; null when nothing was.
    committed_by: Option<String>,
    /// Only the host's last resort could commit: the oldest history was dropped (it stays archived).
    degraded: bool,
    /// An outcome was committed: the context changed and the archive below was written.
    committed: bool,
    /// The archive this compaction wrote; null when nothing was committed.
    archive_id: Option<String>,
    /// Why nothing was committed, in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    not_committed: Option<String>,
    /// Why the context is still above the usable window or budget (`degraded` is then set).
    #[serde(skip_serializing_if = "Option::is_none")]
    over_window: Option<String>,
    /// What the budget left out of the checkpoint the context shows: items per section.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    left_out: std::collections::BTreeMap<String, u64>,
    /// `artifact://` URIs of what was set aside.
    artifacts: Vec<String>,
    replaced: usize,
    forgotten: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rejected: Option<String>,
    /// Handover: the text that starts the fresh session.
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<String>,
    /// Entries pinned for this run (by id, `!pin` or a policy rule), carried verbatim.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pinned: Vec<String>,
    /// Pins refused because they would not fit the pins budget, each with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pins_refused: Vec<String>,
    /// A dry run: what would have been committed; nothing was written. Absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
    /// A dry run's prompt-cache rewrite cost per priced model.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    cache_rewrite: Vec<CacheRewriteOut>,
}

#[derive(Serialize, JsonSchema)]
struct CacheRewriteOut {
    model: String,
    /// The first call after the compaction: the whole new context written to the cache.
    next_call_usd: f64,
    /// The same call without the compaction: the old context read from the cache.
    next_call_uncompacted_usd: f64,
    /// Calls until the smaller context pays the rewrite back; null: never at this price.
    break_even_calls: Option<u64>,
}

/// A report with the new working context.
#[derive(Serialize, JsonSchema)]
struct Compacted {
    #[serde(flatten)]
    report: Report,
    /// `cairn` or `openai`: the caller's format when Cairn writes it, else Cairn JSONL.
    format: &'static str,
    /// The compacted working context.
    transcript: String,
    /// The first entry of the verbatim tail: from it on, nothing changed. Null when nothing was committed.
    first_kept_entry_id: Option<String>,
    /// The compacted context before that entry as text, for a harness that replaces a prefix by
    /// a summary (Pi's compaction entry).
    prefix_summary: String,
    /// Line kinds of the transcript its reader does not know; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    unrecognized: Option<UnrecognizedOut>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum UsageWord {
    /// The host counts the whole context.
    Counted,
    /// Nothing automatic happens.
    Unknown,
    /// The usage the transcript records (Pi, Claude Code, Codex), else counted.
    Recorded,
}

#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum UsageArg {
    Word(UsageWord),
    /// The provider's last billed figure, plus the host's count of the entries after it.
    Reported {
        reported_tokens: u64,
        #[serde(default)]
        entries_after: usize,
    },
}

impl UsageArg {
    /// The measure an argument names, for `transcript` [default: counted].
    fn resolve(arg: Option<UsageArg>, transcript: &Transcript) -> Usage {
        match arg.unwrap_or(UsageArg::Word(UsageWord::Counted)) {
            UsageArg::Word(UsageWord::Counted) => Usage::Counted,
            UsageArg::Word(UsageWord::Unknown) => Usage::Unknown,
            UsageArg::Word(UsageWord::Recorded) => Usage::recorded_or_counted(&transcript.entries),
            UsageArg::Reported { reported_tokens, entries_after } => Usage::Reported { tokens: reported_tokens, entries_after },
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BoundaryArgs {
    conversation: String,
    turn: u32,
    /// The working context as the model would see it next. Exactly one of `transcript` and `path`.
    transcript: Option<String>,
    /// A file holding the working context, read by the server instead of `transcript`. Only
    /// over stdio, where harness and server share a disk; refused over HTTP.
    path: Option<String>,
    /// The model's context window in tokens.
    window: u64,
    /// Tokens kept free for the reply [default 16384].
    reserve: Option<u64>,
    /// [default "counted"]
    usage: Option<UsageArg>,
    /// [default true]
    turn_complete: Option<bool>,
    /// [default false]
    tool_call_outstanding: Option<bool>,
    /// Return the working context as `transcript` [default true].
    include_transcript: Option<bool>,
    /// Decide and run as this boundary would, writing nothing (no record, state or notices) [default false].
    dry_run: Option<bool>,
    /// The `acknowledged` entry id the previous boundary returned: `transcript` then holds only
    /// the entries appended after it, and the server rebuilds the rest from its record. A
    /// history that is no longer the acknowledged one fails with `diverged: …`: send it whole once.
    since: Option<String>,
    /// With `since`: the entries' format, when a fragment does not show it (`pi`: session lines
    /// without the header, each with its `id`) [default: detected].
    format: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct ActionOut {
    /// none, advised, compacted, handed-over, deferred, paused or failed.
    kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct BoundaryOut {
    turn: u32,
    action: ActionOut,
    /// A line to append to the turn for the agent.
    advice: Option<String>,
    /// Context tokens as the trigger saw them; null when unknown.
    usage: Option<u64>,
    report: Option<Report>,
    /// Notices queued by this boundary (take them with `notices_take`).
    notices: Vec<String>,
    format: &'static str,
    /// The working context after this boundary ("" when not asked for).
    transcript: String,
    /// As `compact`'s, when this boundary compacted or handed over.
    first_kept_entry_id: Option<String>,
    prefix_summary: String,
    /// Files the last compaction described that changed since (`serve --workspace`).
    stale_files: Vec<StaleOut>,
    /// Line kinds of the transcript its reader does not know; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    unrecognized: Option<UnrecognizedOut>,
    /// A dry run: nothing was written. Absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
    /// The last entry of the working context after this boundary: the next call's `since`.
    /// Null when the context cannot be followed incrementally (send it whole next time).
    acknowledged: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UndoArgs {
    conversation: String,
    /// The compaction to take back (and every later one) [default: the latest].
    archive_id: Option<String>,
    /// The working context now, in any format Cairn reads [default: the context the record knows].
    transcript: Option<String>,
    /// A file holding the working context now, read by the server instead of `transcript`.
    /// Only over stdio, where harness and server share a disk; refused over HTTP.
    path: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct UndoOut {
    /// Archive ids taken back, latest first.
    undone: Vec<String>,
    tokens_before: u64,
    tokens_after: u64,
    /// The caller's format when Cairn writes it, else `cairn`.
    format: &'static str,
    /// The restored context.
    transcript: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PinArgs {
    conversation: String,
    /// Entry ids, as the transcript names them.
    ids: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
struct PinsOut {
    /// The ids pinned now.
    pinned: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShowArgs {
    conversation: String,
    /// One compaction's archive id; without it, the timeline.
    archive_id: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct ShowOut {
    /// Without `archive_id`: every compaction, undo and pin, oldest first, and the pins now.
    #[serde(skip_serializing_if = "Option::is_none")]
    timeline: Option<serde_json::Value>,
    /// With `archive_id`: that compaction part by part (kept, summarized, summaries, elided, dropped) and its steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    compaction: Option<serde_json::Value>,
}

/// Kinds counted by name: `skipped` carried nothing for the model, `kept` carried a message
/// whose text was kept as an opaque entry.
#[derive(Serialize, JsonSchema)]
struct UnrecognizedOut {
    skipped: std::collections::BTreeMap<String, u32>,
    kept: std::collections::BTreeMap<String, u32>,
}

impl UnrecognizedOut {
    fn of(t: &Transcript) -> Option<Self> {
        let u = &t.unrecognized;
        (!u.is_empty()).then(|| UnrecognizedOut { skipped: u.skipped.clone(), kept: u.kept.clone() })
    }
}

#[derive(Serialize, JsonSchema)]
struct StaleOut {
    /// Relative to the workspace.
    path: String,
    /// `changed` or `deleted`.
    change: String,
}

#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Compact,
    Handover,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RequestArgs {
    conversation: String,
    kind: Kind,
    #[serde(default)]
    preserve: String,
    #[serde(default)]
    resume: String,
}

#[derive(Serialize, JsonSchema)]
struct Recorded {
    recorded: bool,
    message: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ConversationArgs {
    conversation: String,
}

#[derive(Serialize, JsonSchema)]
struct NoticeOut {
    id: String,
    /// compacted, handed-over, failed, paused, degraded, plugin-failed, resumed, or policy (the server's).
    kind: String,
    text: String,
    /// Milliseconds since the Unix epoch.
    at: u64,
}

#[derive(Serialize, JsonSchema)]
struct Notices {
    notices: Vec<NoticeOut>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AckArgs {
    conversation: String,
    ids: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
struct Acknowledged {
    acknowledged: usize,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ArtifactArgs {
    /// `artifact://a-<16 hex>/<n>`
    uri: String,
}

#[derive(Serialize, JsonSchema)]
struct Artifact {
    uri: String,
    /// The stored original, byte for byte.
    content: String,
    bytes: usize,
}

#[derive(Serialize, JsonSchema)]
struct PluginOut {
    name: String,
    kind: String,
    version: String,
    imports: Vec<String>,
    wasi: bool,
    /// Its compiled code came from the code cache.
    cached: bool,
    source: String,
}

#[derive(Serialize, JsonSchema)]
struct PolicyOut {
    source: String,
    chain: Vec<String>,
    handover: Vec<String>,
    trigger: Option<String>,
    commit: Option<String>,
    /// +1 for every swap since the server started.
    generation: u64,
}

#[derive(Serialize, JsonSchema)]
struct PluginsOut {
    plugins: Vec<PluginOut>,
    policy: PolicyOut,
}

#[derive(Serialize, JsonSchema)]
struct Reloaded {
    swapped: bool,
    policy: PolicyOut,
    /// Why the new policy was refused (file:line:column); the old one keeps running.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PolicySetArgs {
    conversation: String,
    /// Automatic maintenance on or off (agent requests still run).
    maintenance: Option<bool>,
    /// Automatic handover on or off (off: the trigger's handovers become compactions).
    auto_handover: Option<bool>,
    /// Lift an automatic pause now.
    resume: Option<bool>,
}

#[derive(Serialize, JsonSchema)]
struct OverlayOut {
    maintenance: Option<bool>,
    auto_handover: Option<bool>,
}

#[derive(Serialize, JsonSchema)]
struct PolicySet {
    overlay: OverlayOut,
    paused: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MaintenanceArgs {
    /// compact: condense older history; handover: continue in a fresh session.
    action: Kind,
    /// What must survive (constraints, decisions, open questions), in your words.
    preserve: String,
    /// How to resume after it: the next step.
    resume: String,
}

/// What every tool returns (spelled out in the tools' signatures: the macro reads them to
/// generate the output schema). A failure is a text-only tool error naming what was wrong:
/// clients such as the official TypeScript SDK check any structured content against the
/// output schema, error results included.
type Answer<T> = Result<Json<T>, String>;

// ---- harness tools --------------------------------------------------------------------------

#[tool_router(router = harness_router)]
impl Server {
    /// Compacts a transcript now under the current policy and records it durably.
    #[tool(
        description = "Compact a transcript now (any format Cairn reads); returns the report, the compacted context in the caller's format, and the kept tail's first entry with a text rendering of what precedes it"
    )]
    async fn compact(&self, extensions: Extensions, Parameters(args): Parameters<RunArgs>) -> Result<Json<Compacted>, String> {
        self.run(self.tenant(&extensions)?, args, false).await
    }

    #[tool(description = "Hand the conversation over to a fresh session: archive it and return the seed of the next one")]
    async fn handover(&self, extensions: Extensions, Parameters(args): Parameters<RunArgs>) -> Result<Json<Compacted>, String> {
        self.run(self.tenant(&extensions)?, args, true).await
    }

    #[tool(description = "Report a turn boundary: the trigger, commit policy and chain decide what happens; returns the action and the working context after it")]
    async fn boundary(&self, extensions: Extensions, Parameters(mut args): Parameters<BoundaryArgs>) -> Result<Json<BoundaryOut>, String> {
        let conversation = key(&args.conversation)?;
        let source = self.source(args.transcript.take(), args.path.take())?.ok_or(NO_TRANSCRIPT)?;
        self.locked(self.tenant(&extensions)?, conversation.clone(), move |lifecycle| {
            let (transcript, format) = match &args.since {
                None => source.parse()?,
                Some(_) => source.parse_appended(args.format.as_deref())?,
            };
            let input = transcript.clone();
            let usage = UsageArg::resolve(args.usage, &transcript);
            let reported = BoundaryReport {
                conversation,
                turn: args.turn,
                turn_complete: args.turn_complete.unwrap_or(true),
                tool_call_outstanding: args.tool_call_outstanding.unwrap_or(false),
                window: args.window,
                reserve: args.reserve.unwrap_or(16_384),
                usage,
                transcript,
            };
            let dry_run = args.dry_run.unwrap_or(false);
            let incremental = args.since.is_some();
            let outcome = match (args.since, dry_run) {
                (None, false) => lifecycle.boundary_blocking(reported)?,
                (None, true) => lifecycle.dry_run_blocking(reported)?,
                (Some(since), false) => lifecycle.boundary_since_blocking(reported, Some(since))?,
                (Some(since), true) => lifecycle.dry_run_since_blocking(reported, Some(since))?,
            };
            let action = serde_json::to_value(&outcome.action)?;
            let kept = outcome.report.as_ref().map(|run| Kept::of(outcome.before.as_ref().unwrap_or(&input), run)).unwrap_or_default();
            // An incremental call gets the context back only when maintenance changed it.
            let changed = outcome.before.is_some() || matches!(outcome.action, lifecycle::Action::HandedOver);
            let wanted = args.include_transcript.or(incremental.then_some(changed));
            let (format, transcript) = write(&outcome.transcript, format, wanted);
            Ok(BoundaryOut {
                turn: outcome.turn,
                action: ActionOut { kind: action["kind"].as_str().unwrap_or_default().to_string(), reason: action.get("reason").and_then(|r| r.as_str()).map(str::to_string) },
                advice: outcome.advice,
                usage: outcome.usage,
                report: outcome.report.as_ref().map(report),
                notices: outcome.notices,
                format,
                transcript,
                first_kept_entry_id: kept.first_kept_entry_id,
                stale_files: outcome.stale_files.iter().map(|f| StaleOut { path: f.path.clone(), change: f.change.word().into() }).collect(),
                prefix_summary: kept.prefix_summary,
                unrecognized: UnrecognizedOut::of(&input),
                dry_run,
                acknowledged: outcome.acknowledged,
            })
        })
        .await
    }

    #[tool(description = "Record an agent request (compact or handover); it runs at the next boundary the cooldown allows")]
    async fn request(&self, extensions: Extensions, Parameters(args): Parameters<RequestArgs>) -> Result<Json<Recorded>, String> {
        let conversation = key(&args.conversation)?;
        self.locked(self.tenant(&extensions)?, conversation.clone(), move |lifecycle| {
            lifecycle.request_blocking(&conversation, agent_request(args.kind, args.preserve, args.resume))?;
            Ok(Recorded { recorded: true, message: "recorded; it runs at the next boundary the cooldown allows".into() })
        })
        .await
    }

    #[tool(description = "Notices not yet acknowledged, oldest first: maintenance done or failed, pauses, and the server's policy swaps")]
    async fn notices_take(&self, extensions: Extensions, Parameters(args): Parameters<ConversationArgs>) -> Result<Json<Notices>, String> {
        let conversation = key(&args.conversation)?;
        let serve = self.serve.clone();
        let tenant = self.tenant(&extensions)?;
        self.locked(tenant.clone(), conversation.clone(), move |lifecycle| {
            let mut notices = lifecycle::take_notices(lifecycle.home(), &conversation)?;
            notices.extend(serve.notices_for(&tenant));
            Ok(Notices { notices: notices.into_iter().map(|n| NoticeOut { id: n.id, kind: n.kind, text: n.text, at: n.at }).collect() })
        })
        .await
    }

    #[tool(description = "Acknowledge notices: they are not delivered again")]
    async fn notices_ack(&self, extensions: Extensions, Parameters(args): Parameters<AckArgs>) -> Result<Json<Acknowledged>, String> {
        let conversation = key(&args.conversation)?;
        let serve = self.serve.clone();
        let tenant = self.tenant(&extensions)?;
        self.locked(tenant.clone(), conversation.clone(), move |lifecycle| {
            // The server's own notices are acknowledged here (for this tenant); the rest in the
            // conversation's outbox.
            let theirs = serve.ack_for(&tenant, &args.ids);
            if !theirs.is_empty() {
                let mut store = lifecycle.home().existing_conversation_to_write(&conversation)?;
                for id in theirs {
                    store.ack_notice(id)?;
                }
            }
            Ok(Acknowledged { acknowledged: args.ids.len() })
        })
        .await
    }

    #[tool(description = "Undo a compaction (default the latest) and every later one; returns the restored context in the caller's format. The lifecycle's cooldown starts again at the next boundary")]
    async fn undo(&self, extensions: Extensions, Parameters(mut args): Parameters<UndoArgs>) -> Result<Json<UndoOut>, String> {
        let conversation = key(&args.conversation)?;
        let source = self.source(args.transcript.take(), args.path.take())?;
        self.locked(self.tenant(&extensions)?, conversation.clone(), move |lifecycle| {
            let current = source.map(|source| source.parse()).transpose()?;
            let mut store = lifecycle.home().existing_conversation_to_write(&conversation)?;
            let undone = cairn::undo::undo(&mut store, &lifecycle.cairn().tokenizer(), current.as_ref().map(|(t, _)| t), args.archive_id.as_deref())?;
            let format = current.map(|(_, f)| f).unwrap_or(formats::Format::Cairn);
            let (format, transcript) = write(&undone.transcript, format, Some(true));
            Ok(UndoOut { undone: undone.undone, tokens_before: undone.tokens_before, tokens_after: undone.tokens_after, format, transcript })
        })
        .await
    }

    #[tool(description = "Pin entries by id: they survive every compaction verbatim. A pin over the policy's pin budget is refused, naming the entry and the budget")]
    async fn pin(&self, extensions: Extensions, Parameters(args): Parameters<PinArgs>) -> Result<Json<PinsOut>, String> {
        self.pins(extensions, args, true).await
    }

    #[tool(description = "Unpin entries pinned by id; an id not pinned is an error")]
    async fn unpin(&self, extensions: Extensions, Parameters(args): Parameters<PinArgs>) -> Result<Json<PinsOut>, String> {
        self.pins(extensions, args, false).await
    }

    #[tool(description = "What compaction did: the conversation's timeline (compactions, undos, pins), or with archive_id one compaction part by part with its steps")]
    async fn show(&self, extensions: Extensions, Parameters(args): Parameters<ShowArgs>) -> Result<Json<ShowOut>, String> {
        let conversation = key(&args.conversation)?;
        self.locked(self.tenant(&extensions)?, conversation.clone(), move |lifecycle| {
            let home = lifecycle.home();
            if !home.conversations()?.contains(&conversation) {
                anyhow::bail!("no conversation {conversation}");
            }
            let store = home.existing_conversation(&conversation)?;
            Ok(match &args.archive_id {
                None => ShowOut { timeline: Some(serde_json::to_value(cairn::show::timeline(&store))?), compaction: None },
                Some(id) => ShowOut { timeline: None, compaction: Some(serde_json::to_value(cairn::show::compaction(&store, id)?)?) },
            })
        })
        .await
    }

    #[tool(description = "The stored original behind an artifact:// URI, byte for byte")]
    async fn artifact_get(&self, extensions: Extensions, Parameters(args): Parameters<ArtifactArgs>) -> Result<Json<Artifact>, String> {
        // Only the caller's tenant is searched: another tenant's archive is "not found".
        let home = self.serve.home_for(&self.tenant(&extensions)?);
        blocking(move || {
            let uri: ArtifactUri = args.uri.parse()?;
            let bytes = home.find_artifact(&uri)?;
            let content = String::from_utf8(bytes).context("the artifact is not UTF-8 text; read it with `cairn artifact`")?;
            Ok(Artifact { uri: args.uri, bytes: content.len(), content })
        })
        .await
    }

    #[tool(description = "The plugins this server runs and the policy in force")]
    async fn plugins_list(&self) -> Result<Json<PluginsOut>, String> {
        let generation = self.serve.generation().await?;
        let cairn = generation.lifecycle.cairn();
        let plugins = cairn
            .plugins()
            .map(|p| PluginOut {
                name: p.manifest.name.clone(),
                kind: p.manifest.kind.to_string(),
                version: p.manifest.version.clone(),
                imports: p.imports.iter().map(|i| i.name().to_string()).collect(),
                wasi: p.uses_wasi,
                cached: p.from_cache,
                source: p.source.clone(),
            })
            .collect();
        Ok(Json(PluginsOut { plugins, policy: policy_out(&generation) }))
    }

    #[tool(description = "Re-read the policy file and plugin directories; a policy that fails its checks is refused and the old one keeps running")]
    async fn policy_reload(&self) -> Result<Json<Reloaded>, String> {
        let serve = self.serve.clone();
        blocking(move || {
            Ok(match serve.reload(true) {
                Ok(generation) => Reloaded { swapped: true, policy: policy_out(&generation), error: None },
                Err(error) => match serve.loaded() {
                    Some(running) => Reloaded { swapped: false, policy: policy_out(&running), error: Some(format!("{error:#}")) },
                    None => return Err(error),
                },
            })
        })
        .await
    }

    #[tool(description = "Per-conversation switches over the policy, persisted: automatic maintenance on/off, automatic handover on/off, resume after an automatic pause")]
    async fn policy_set(&self, extensions: Extensions, Parameters(args): Parameters<PolicySetArgs>) -> Result<Json<PolicySet>, String> {
        let conversation = key(&args.conversation)?;
        self.locked(self.tenant(&extensions)?, conversation.clone(), move |lifecycle| {
            let home = lifecycle.home();
            if args.resume == Some(true) {
                lifecycle::resume(home, &conversation)?;
            }
            let (overlay, paused) = lifecycle::set_overlay(home, &conversation, args.maintenance, args.auto_handover)?;
            Ok(PolicySet { overlay: OverlayOut { maintenance: overlay.maintenance, auto_handover: overlay.auto_handover }, paused })
        })
        .await
    }
}

// ---- agent tools ----------------------------------------------------------------------------

#[tool_router(router = agent_router)]
impl Server {
    #[tool(description = "Ask for context maintenance when your context is getting full or you reach a natural checkpoint. \
        It does not happen now: finish the current turn at a coherent checkpoint; the harness runs it at the next safe \
        boundary after the turn. Say what must survive and how to resume.")]
    async fn context_maintenance(&self, extensions: Extensions, Parameters(args): Parameters<MaintenanceArgs>) -> Result<Json<Recorded>, String> {
        let conversation = self.serve.own.clone();
        self.locked(self.tenant(&extensions)?, conversation.clone(), move |lifecycle| {
            let what = match args.action {
                Kind::Compact => "compaction",
                Kind::Handover => "handover to a fresh session",
            };
            lifecycle.request_blocking(&conversation, agent_request(args.action, args.preserve, args.resume))?;
            Ok(Recorded {
                recorded: true,
                message: format!(
                    "Recorded. Finish the current turn at a coherent checkpoint (no half-done edits, tests run); the {what} \
                     happens at the next safe boundary after this turn, keeping what you asked to preserve."
                ),
            })
        })
        .await
    }
}

/// `session_history`, defined once in `cairn::recall` (the same schema embedders give their
/// models), bound to the server's own conversation (in the caller's tenant).
fn session_history() -> ToolRoute<Server> {
    let definition = cairn::recall::tool_definition();
    let schema = definition["parameters"].as_object().cloned().unwrap_or_default();
    let description = definition["description"].as_str().unwrap_or_default().to_string();
    ToolRoute::new_dyn(Tool::new("session_history", description, Arc::new(schema)), |context: ToolCallContext<'_, Server>| {
        let serve = context.service.serve.clone();
        let tenant = context.service.tenant(&context.request_context.extensions);
        let arguments = serde_json::Value::Object(context.arguments.clone().unwrap_or_default()).to_string();
        Box::pin(async move {
            let tenant = match tenant {
                Ok(tenant) => tenant,
                Err(refused) => return Ok(CallToolResult::error(vec![rmcp::model::ContentBlock::text(refused)]).into()),
            };
            // Storage only: never waits for the plugins.
            let answer = tokio::task::spawn_blocking(move || cairn::recall::execute_json(&serve.home_for(&tenant), &serve.own, &arguments))
                .await
                .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }));
            let result = if answer.get("error").is_some() { CallToolResult::structured_error(answer) } else { CallToolResult::structured(answer) };
            Ok(result.into())
        })
    })
}

/// Drops the integer `format`s schemars writes (`uint64`, `int32`, …): they are not JSON
/// Schema formats, and strict validators (the TypeScript SDK's) warn about each one. The
/// bounds stay as `minimum`.
fn standard_formats(schema: &mut serde_json::Map<String, serde_json::Value>) {
    if schema.get("format").and_then(|f| f.as_str()).is_some_and(|f| f.starts_with("uint") || f.starts_with("int") || f == "double" || f == "float") {
        schema.remove("format");
    }
    for value in schema.values_mut() {
        match value {
            serde_json::Value::Object(inner) => standard_formats(inner),
            serde_json::Value::Array(items) => items.iter_mut().filter_map(|v| v.as_object_mut()).for_each(standard_formats),
            _ => {}
        }
    }
}

// ---- the work -------------------------------------------------------------------------------

impl Server {
    /// Runs `work` for one conversation of `tenant`: after the calls before it for that
    /// conversation, on the policy generation current now, on the blocking pool, with a
    /// lifecycle whose home is the tenant's.
    async fn locked<T: Send + 'static>(&self, tenant: Tenant, conversation: ConversationKey, work: impl FnOnce(&Lifecycle) -> Result<T> + Send + 'static) -> Answer<T> {
        // The generation is taken before waiting: a call that started before a swap finishes
        // on the policy it started with.
        let generation = self.serve.generation().await?;
        let lock = self.serve.conversation_lock(&tenant, &conversation);
        let _turn = lock.lock().await;
        blocking(move || work(&scoped(&generation.lifecycle, &tenant))).await
    }

    async fn run(&self, tenant: Tenant, mut args: RunArgs, handover: bool) -> Answer<Compacted> {
        let conversation = key(&args.conversation)?;
        let source = self.source(args.transcript.take(), args.path.take())?.ok_or(NO_TRANSCRIPT)?;
        self.locked(tenant, conversation.clone(), move |lifecycle| {
            let (transcript, format) = source.parse()?;
            let dry_run = args.dry_run.unwrap_or(false);
            let mut store = if dry_run { lifecycle.home().preview(&conversation)? } else { lifecycle.home().conversation(&conversation)? };
            let options = RunOptions {
                preserve: args.preserve.as_deref(),
                resume: args.resume.as_deref(),
                workspace: lifecycle.workspace(),
                window: args.window,
                budget: args.budget,
                dry_run,
                usage: Some(UsageArg::resolve(args.usage.take(), &transcript)),
                ..RunOptions::default()
            };
            let (cairn, policy) = (lifecycle.cairn(), lifecycle.policy());
            let run = if handover { cairn.handover_with(policy, &mut store, &transcript, "serve", options)? } else { cairn.compact_with(policy, &mut store, &transcript, "serve", options)? };
            Ok(compacted(&transcript, &run, format, args.include_transcript))
        })
        .await
    }

    /// Where a harness call's transcript comes from: its `transcript` text or its `path`, not
    /// both (None: neither). A `path` only over stdio: a remote client never makes the server
    /// read a file.
    fn source(&self, text: Option<String>, path: Option<String>) -> Result<Option<Source>, String> {
        match (text, path) {
            (Some(_), Some(_)) => Err("give the transcript either as `transcript` (its text) or as `path` (its file), not both".into()),
            (_, Some(_)) if self.tenancy != Tenancy::Home => Err("`path` is only accepted over stdio, where harness and server share a disk; send the `transcript` text".into()),
            (_, Some(path)) => Ok(Some(Source::File(std::path::PathBuf::from(path)))),
            (Some(text), None) => Ok(Some(Source::Text(text))),
            (None, None) => Ok(None),
        }
    }

    /// `pin` and `unpin`: checked against the pin budget of the policy in force.
    async fn pins(&self, extensions: Extensions, args: PinArgs, pinned: bool) -> Answer<PinsOut> {
        let conversation = key(&args.conversation)?;
        self.locked(self.tenant(&extensions)?, conversation.clone(), move |lifecycle| {
            let mut store = lifecycle.home().existing_conversation_to_write(&conversation)?;
            let now = store.pinned_ids();
            if pinned {
                let new: Vec<String> = args.ids.iter().filter(|id| !now.contains(*id)).cloned().collect();
                cairn::pins::check_request(&store.context()?, &now, &new, &lifecycle.policy().pins)?;
                if !new.is_empty() {
                    store.record_pins(new, true)?;
                }
            } else {
                let not: Vec<&str> = args.ids.iter().filter(|id| !now.contains(*id)).map(String::as_str).collect();
                if !not.is_empty() {
                    anyhow::bail!("not pinned: {}", cairn::echo::inputs(&not, 5));
                }
                store.record_pins(args.ids, false)?;
            }
            Ok(PinsOut { pinned: store.pinned_ids().into_iter().collect() })
        })
        .await
    }
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> Result<T> + Send + 'static) -> Answer<T> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Ok(Json(value)),
        Ok(Err(error)) => Err(format!("{error:#}")),
        Err(panic) => Err(format!("internal error: {panic}")),
    }
}

fn key(text: &str) -> Result<ConversationKey, String> {
    ConversationKey::parse(text).map_err(|e| format!("conversation: {e}"))
}

fn agent_request(kind: Kind, preserve: String, resume: String) -> AgentRequest {
    let kind = match kind {
        Kind::Compact => RequestKind::Compact,
        Kind::Handover => RequestKind::Handover,
    };
    AgentRequest { kind, preserve, resume }
}

fn report(run: &CompactionReport) -> Report {
    Report {
        tokens_before: run.tokens_before,
        tokens_after: run.tokens_after,
        steps: run.steps.iter().map(step).collect(),
        committed_by: run.committed_by.clone(),
        degraded: run.degraded,
        committed: run.committed,
        archive_id: run.archive.clone(),
        not_committed: run.not_committed.clone(),
        over_window: run.over_window.clone(),
        left_out: run.left_out.clone(),
        artifacts: run.artifacts.clone(),
        replaced: run.replaced,
        forgotten: run.forgotten.clone(),
        rejected: run.rejected.clone(),
        seed: run.seed.clone(),
        pinned: run.pinned.clone(),
        pins_refused: run.pins_refused.clone(),
        dry_run: run.dry_run,
        cache_rewrite: run
            .cache_rewrite
            .iter()
            .map(|c| CacheRewriteOut { model: c.model.to_string(), next_call_usd: c.next_call_usd, next_call_uncompacted_usd: c.next_call_uncompacted_usd, break_even_calls: c.break_even_calls })
            .collect(),
    }
}

fn step(step: &StepReport) -> Step {
    Step { plugin: step.plugin.clone(), outcome: step.outcome.to_string(), millis: step.millis, message: step.message.clone(), tokens_after: step.tokens_after, refused: step.refused.clone() }
}

/// The caller's format when Cairn writes it, else Cairn JSONL ("" when not wanted).
const NO_TRANSCRIPT: &str = "no transcript: give its text as `transcript`, or (over stdio) its file as `path`";

/// A harness call's transcript: the text it sent, or a file on the server's disk (stdio only).
enum Source {
    Text(String),
    File(std::path::PathBuf),
}

impl Source {
    fn parse(&self) -> Result<(Transcript, formats::Format)> {
        match self {
            Source::Text(text) => Ok(formats::parse(text, "transcript")?),
            Source::File(path) => {
                let name = path.display().to_string();
                let text = std::fs::read_to_string(path).with_context(|| format!("reading the transcript file {name} (`path`)"))?;
                Ok(formats::parse(&text, &name)?)
            }
        }
    }
}

impl Source {
    /// An incremental boundary's entries (see `BoundaryArgs::since`): read in `format` when
    /// named, else detected. A Pi fragment gets the session header it lacks, and each of its
    /// entries must carry its `id` (session version 2 on): ids by line position would restart.
    fn parse_appended(&self, format: Option<&str>) -> Result<(Transcript, formats::Format)> {
        let text = match self {
            Source::Text(text) => std::borrow::Cow::Borrowed(text.as_str()),
            Source::File(path) => std::borrow::Cow::Owned(std::fs::read_to_string(path).with_context(|| format!("reading the transcript file {} (`path`)", path.display()))?),
        };
        let format = format.map(format_named).transpose()?;
        if text.trim().is_empty() {
            return Ok((Transcript::default(), format.unwrap_or(formats::Format::Cairn)));
        }
        match format {
            Some(formats::Format::Pi) => {
                let mut lines = text.lines().filter(|l| !l.trim().is_empty()).peekable();
                let has_header = lines.peek().and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok()).is_some_and(|v| v["type"] == "session");
                for (n, line) in lines.enumerate().skip(usize::from(has_header)) {
                    let value: serde_json::Value = serde_json::from_str(line).with_context(|| format!("appended Pi entry {}", n + 1))?;
                    if !value["id"].is_string() {
                        anyhow::bail!("appended Pi entry {} has no `id`: a Pi fragment needs session version 2 or later (send the whole transcript)", n + 1);
                    }
                }
                let text = if has_header { text } else { std::borrow::Cow::Owned(format!("{{\"type\":\"session\",\"version\":3,\"id\":\"appended\"}}\n{text}")) };
                Ok((formats::parse_as(formats::Format::Pi, &text, "transcript")?, formats::Format::Pi))
            }
            Some(format) => Ok((formats::parse_as(format, &text, "transcript")?, format)),
            None => Ok(formats::parse(&text, "transcript")?),
        }
    }
}

/// A format by the name `formats::Format::name` gives it.
fn format_named(name: &str) -> Result<formats::Format> {
    use formats::Format::*;
    [Cairn, Pi, ClaudeCode, Codex, Gemini, OpenCode, OpenAi, Anthropic]
        .into_iter()
        .find(|f| f.name() == name)
        .with_context(|| format!("unknown format {name:?}: cairn, pi, claude-code, codex, gemini, opencode, openai or anthropic"))
}

fn write(transcript: &Transcript, format: formats::Format, wanted: Option<bool>) -> (&'static str, String) {
    let format = if format.writable() { format } else { formats::Format::Cairn };
    let text = if wanted.unwrap_or(true) { formats::write(format, transcript).unwrap_or_default() } else { String::new() };
    (format.name(), text)
}

fn compacted(input: &Transcript, run: &CompactionReport, format: formats::Format, include_transcript: Option<bool>) -> Compacted {
    let Kept { first_kept_entry_id, prefix_summary } = Kept::of(input, run);
    let (format, transcript) = write(&run.transcript, format, include_transcript);
    Compacted { report: report(run), format, transcript, first_kept_entry_id, prefix_summary, unrecognized: UnrecognizedOut::of(input) }
}

/// A committed run as "a summary, then the entries kept verbatim" (Pi's compaction entry).
#[derive(Default)]
struct Kept {
    first_kept_entry_id: Option<String>,
    prefix_summary: String,
}

impl Kept {
    fn of(input: &Transcript, run: &CompactionReport) -> Self {
        if run.committed_by.is_none() {
            return Kept::default();
        }
        let output = &run.transcript.entries;
        let kept = kept_tail_start(&input.entries, output);
        Kept { first_kept_entry_id: output.get(kept).map(|e| e.id.clone()), prefix_summary: render_prefix(&output[..kept], &run.archive_id, &run.pinned) }
    }
}

/// Where the unchanged tail of `output` begins: the longest run of entries at its end that the
/// input ends with too (same ids, same parts), started past any tool results, so a kept
/// result never loses its call to the summary.
fn kept_tail_start(input: &[Entry], output: &[Entry]) -> usize {
    let common = input.iter().rev().zip(output.iter().rev()).take_while(|(a, b)| a.id == b.id && a.parts == b.parts).count();
    let mut start = output.len() - common;
    while output.get(start).is_some_and(|e| e.role == Role::Tool) {
        start += 1;
    }
    start
}

/// Budget of a prefix summary, in chars (~8k tokens): it replaces history, so a later
/// compaction must be able to shrink a context that holds it.
const PREFIX_BUDGET_CHARS: usize = 32_000;
/// Per entry: operator messages and earlier summaries are intent and keep more.
const INTENT_CHARS: usize = cairn_rules::SEED_MESSAGE_CHARS;
const ENTRY_CHARS: usize = 400;

/// The compacted entries as one bounded text, roles marked: operator messages and earlier
/// summaries first in importance (clipped at 2,000 chars), other entries clipped at 400, the
/// oldest of those dropped when over budget. The whole prefix stays in the archive.
fn render_prefix(entries: &[Entry], archive_id: &str, pinned: &[String]) -> String {
    let lines: Vec<(bool, String)> = entries
        .iter()
        .map(|entry| {
            let role = match (entry.origin, entry.role) {
                (Origin::Summary, _) => "summary",
                (_, Role::System) => "system",
                (_, Role::User) => "user",
                (_, Role::Assistant) => "assistant",
                (_, Role::Tool) => "tool result",
            };
            let text = entry.model_text();
            // A pinned entry is carried whole, never clipped or left out.
            if pinned.contains(&entry.id) {
                return (true, format!("\n[pinned {role}] {}", text.trim()));
            }
            let intent = matches!(entry.origin, Origin::Summary | Origin::Operator);
            let clip = if intent { INTENT_CHARS } else { ENTRY_CHARS };
            let clipped = cairn_rules::clip_chars(text.trim(), clip);
            let more = if clipped.len() < text.trim().len() { " …" } else { "" };
            (intent, format!("\n[{role}] {clipped}{more}"))
        })
        .collect();
    // Over budget: the oldest non-intent lines go first.
    let mut keep = vec![true; lines.len()];
    let mut total: usize = lines.iter().map(|(_, l)| l.len()).sum();
    for (i, (intent, line)) in lines.iter().enumerate() {
        if total <= PREFIX_BUDGET_CHARS {
            break;
        }
        if !intent {
            keep[i] = false;
            total -= line.len();
        }
    }
    let dropped = keep.iter().filter(|k| !**k).count();
    let mut out = format!(
        "The earlier part of this conversation, condensed by Cairn (archive {archive_id}). Long entries are clipped \
         here; what compaction set aside is named by artifact:// URIs that session_history reads back."
    );
    if dropped > 0 {
        out.push_str(&format!(" {dropped} older steps are left out of this summary."));
    }
    out.push('\n');
    for ((_, line), kept) in lines.iter().zip(keep) {
        if kept {
            out.push_str(line);
        }
    }
    out
}

fn policy_out(generation: &Generation) -> PolicyOut {
    let policy = generation.lifecycle.policy();
    let names = |steps: &mut dyn Iterator<Item = &cairn::policy::PolicyStep>| steps.map(|s| s.plugin.manifest.name.clone()).collect();
    PolicyOut {
        source: policy.source.clone(),
        chain: names(&mut policy.compaction_steps()),
        handover: names(&mut policy.handover.iter()),
        trigger: policy.trigger.as_ref().map(|s| s.plugin.manifest.name.clone()),
        commit: policy.commit.as_ref().map(|s| s.plugin.manifest.name.clone()),
        generation: generation.number,
    }
}
