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

use cairn::harness::{self, api::*, Harness};
use cairn::storage::{Credential, Tenant, TokenScope};
use cairn::Lifecycle;
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::{IntoCallToolResult, ToolCallContext};
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
    fn tenant(&self, extensions: &Extensions) -> Result<Tenant, Failure> {
        let refused = |why: &str| Failure(harness::Error::Forbidden(why.into()));
        match self.tenancy {
            Tenancy::Home => Ok(self.serve.home.tenant().clone()),
            Tenancy::PerRequest => {
                let tenant = caller(extensions).map(|caller| caller.tenant.clone()).ok_or_else(|| refused("refused: the request carries no tenant (no verified bearer token)"))?;
                let bound = self.bound.get_or_init(|| tenant.clone());
                if *bound != tenant {
                    return Err(refused("refused: this MCP session was opened with another tenant's token"));
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

// ---- what only the server answers (the rest is `cairn::harness::api`) ----------------------

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
struct MaintenanceArgs {
    /// compact: condense older history; handover: continue in a fresh session.
    action: MaintenanceKind,
    /// What must survive (constraints, decisions, open questions), in your words.
    preserve: String,
    /// How to resume after it: the next step.
    resume: String,
}

/// What every tool returns (spelled out in the tools' signatures: the macro reads them to
/// generate the output schema).
type Answer<T> = Result<Json<T>, Failure>;

/// A failed call as a tool error: the message as its text (old clients match its first word,
/// `diverged:`), the machine code as `_meta["cairn/error"].code`. Not structured content:
/// clients such as the official TypeScript SDK check any structured content against the
/// output schema, error results included.
pub struct Failure(harness::Error);

impl From<harness::Error> for Failure {
    fn from(error: harness::Error) -> Self {
        Failure(error)
    }
}

/// The key of `_meta` a failure's code is under.
pub const ERROR_META: &str = "cairn/error";

impl IntoCallToolResult for Failure {
    fn into_call_tool_result(self) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        let mut result = CallToolResult::error(vec![rmcp::model::ContentBlock::text(self.0.to_string())]);
        result.meta = Some(error_meta(&self.0));
        Ok(result.into())
    }
}

/// `_meta` of a failed call: `{"cairn/error": {"code": …}}`.
fn error_meta(error: &harness::Error) -> rmcp::model::MetaObject {
    let mut meta = rmcp::model::MetaObject::new();
    meta.0.insert(ERROR_META.into(), serde_json::json!({ "code": error.code() }));
    meta
}

// ---- harness tools: each a name and schema for an operation of `cairn::harness` ----------------

#[tool_router(router = harness_router)]
impl Server {
    /// Compacts a transcript now under the current policy and records it durably.
    #[tool(
        description = "Compact a transcript now (any format Cairn reads); returns the report, the compacted context in the caller's format, and the kept tail's first entry with a text rendering of what precedes it"
    )]
    async fn compact(&self, extensions: Extensions, Parameters(args): Parameters<CompactRequest>) -> Result<Json<Compacted>, Failure> {
        self.locked(&extensions, args.conversation.clone(), move |harness| harness.compact(args)).await
    }

    #[tool(description = "Hand the conversation over to a fresh session: archive it and return the seed of the next one")]
    async fn handover(&self, extensions: Extensions, Parameters(args): Parameters<CompactRequest>) -> Result<Json<Compacted>, Failure> {
        self.locked(&extensions, args.conversation.clone(), move |harness| harness.handover(args)).await
    }

    #[tool(description = "Report a turn boundary: the trigger, commit policy and chain decide what happens; returns the action and the working context after it")]
    async fn boundary(&self, extensions: Extensions, Parameters(args): Parameters<BoundaryRequest>) -> Result<Json<BoundaryAnswer>, Failure> {
        self.locked(&extensions, args.conversation.clone(), move |harness| harness.boundary(args)).await
    }

    #[tool(description = "Record an agent request (compact or handover); it runs at the next boundary the cooldown allows")]
    async fn request(&self, extensions: Extensions, Parameters(args): Parameters<MaintenanceRequest>) -> Result<Json<Recorded>, Failure> {
        self.locked(&extensions, args.conversation.clone(), move |harness| harness.request(args)).await
    }

    #[tool(description = "Notices not yet acknowledged, oldest first: maintenance done or failed, pauses, and the server's policy swaps")]
    async fn notices_take(&self, extensions: Extensions, Parameters(args): Parameters<ConversationRequest>) -> Result<Json<Notices>, Failure> {
        let (serve, tenant) = (self.serve.clone(), self.tenant(&extensions)?);
        self.locked(&extensions, args.conversation.clone(), move |harness| {
            let mut answer = harness.notices(args)?;
            answer.notices.extend(serve.notices_for(&tenant).into_iter().map(|n| Notice { id: n.id, kind: n.kind, text: n.text, at: n.at }));
            Ok(answer)
        })
        .await
    }

    #[tool(description = "Acknowledge notices: they are not delivered again")]
    async fn notices_ack(&self, extensions: Extensions, Parameters(args): Parameters<AckRequest>) -> Result<Json<Acknowledged>, Failure> {
        let (serve, tenant) = (self.serve.clone(), self.tenant(&extensions)?);
        self.locked(&extensions, args.conversation.clone(), move |harness| {
            // The server's own notices are acknowledged here (for this tenant); the rest in the
            // conversation's outbox.
            let theirs = serve.ack_for(&tenant, &args.ids).into_iter().cloned().collect();
            harness.acknowledge(AckRequest { conversation: args.conversation, ids: theirs })?;
            Ok(Acknowledged { acknowledged: args.ids.len() })
        })
        .await
    }

    #[tool(description = "Undo a compaction (default the latest) and every later one; returns the restored context in the caller's format. The lifecycle's cooldown starts again at the next boundary")]
    async fn undo(&self, extensions: Extensions, Parameters(args): Parameters<UndoRequest>) -> Result<Json<Restored>, Failure> {
        self.locked(&extensions, args.conversation.clone(), move |harness| harness.undo(args)).await
    }

    #[tool(description = "Pin entries by id: they survive every compaction verbatim. A pin over the policy's pin budget is refused, naming the entry and the budget")]
    async fn pin(&self, extensions: Extensions, Parameters(args): Parameters<PinRequest>) -> Result<Json<Pins>, Failure> {
        self.locked(&extensions, args.conversation.clone(), move |harness| harness.pin(args)).await
    }

    #[tool(description = "Unpin entries pinned by id; an id not pinned is an error")]
    async fn unpin(&self, extensions: Extensions, Parameters(args): Parameters<PinRequest>) -> Result<Json<Pins>, Failure> {
        self.locked(&extensions, args.conversation.clone(), move |harness| harness.unpin(args)).await
    }

    #[tool(description = "What compaction did: the conversation's timeline (compactions, undos, pins), or with archive_id one compaction part by part with its steps")]
    async fn show(&self, extensions: Extensions, Parameters(args): Parameters<ShowRequest>) -> Result<Json<Shown>, Failure> {
        self.locked(&extensions, args.conversation.clone(), move |harness| harness.show(args)).await
    }

    #[tool(description = "The stored original behind an artifact:// URI, byte for byte")]
    async fn artifact_get(&self, extensions: Extensions, Parameters(args): Parameters<ArtifactRequest>) -> Result<Json<Artifact>, Failure> {
        // Only the caller's tenant is searched: another tenant's archive is "not found". Storage
        // only: it does not wait for the plugins.
        let home = self.serve.home_for(&self.tenant(&extensions)?);
        blocking(move || harness::artifact(&home, args)).await
    }

    #[tool(description = "The plugins this server runs and the policy in force")]
    async fn plugins_list(&self) -> Result<Json<PluginsOut>, Failure> {
        let generation = self.generation().await?;
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
    async fn policy_reload(&self) -> Result<Json<Reloaded>, Failure> {
        let serve = self.serve.clone();
        blocking(move || {
            Ok(match serve.reload(true) {
                Ok(generation) => Reloaded { swapped: true, policy: policy_out(&generation), error: None },
                Err(error) => match serve.loaded() {
                    Some(running) => Reloaded { swapped: false, policy: policy_out(&running), error: Some(format!("{error:#}")) },
                    None => return Err(harness::Error::Unavailable(format!("{error:#}"))),
                },
            })
        })
        .await
    }

    #[tool(description = "Per-conversation switches over the policy, persisted: automatic maintenance on/off, automatic handover on/off, resume after an automatic pause")]
    async fn policy_set(&self, extensions: Extensions, Parameters(args): Parameters<SwitchesRequest>) -> Result<Json<Switches>, Failure> {
        self.locked(&extensions, args.conversation.clone(), move |harness| harness.switches(args)).await
    }
}

// ---- agent tools ----------------------------------------------------------------------------

#[tool_router(router = agent_router)]
impl Server {
    #[tool(description = "Ask for context maintenance when your context is getting full or you reach a natural checkpoint. \
        It does not happen now: finish the current turn at a coherent checkpoint; the harness runs it at the next safe \
        boundary after the turn. Say what must survive and how to resume.")]
    async fn context_maintenance(&self, extensions: Extensions, Parameters(args): Parameters<MaintenanceArgs>) -> Result<Json<Recorded>, Failure> {
        let conversation = self.serve.own.to_string();
        self.locked(&extensions, conversation.clone(), move |harness| harness.request(MaintenanceRequest { conversation, kind: args.action, preserve: args.preserve, resume: args.resume })).await
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
                Err(refused) => return refused.into_call_tool_result(),
            };
            // Storage only: never waits for the plugins. A failure is what the model reads
            // (`{"error": …}`), with its code in `_meta` as every tool's.
            let answer = tokio::task::spawn_blocking(move || harness::recall(&serve.home_for(&tenant), &serve.own, &arguments)).await.unwrap_or_else(|e| Err(harness::Error::Internal(e.to_string())));
            let result = match answer {
                Ok(answer) => CallToolResult::structured(answer),
                Err(error) => {
                    let mut result = CallToolResult::structured_error(serde_json::json!({ "error": error.to_string() }));
                    result.meta = Some(error_meta(&error));
                    result
                }
            };
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

/// Why a remote client may not name a file: the server never reads its own disk for one.
const NO_FILES_OVER_HTTP: &str = "`path` is only accepted over stdio, where harness and server share a disk; send the `transcript` text";

impl Server {
    /// The generation a call runs on, once the plugins and policy are loaded.
    async fn generation(&self) -> Result<std::sync::Arc<Generation>, Failure> {
        self.serve.generation().await.map_err(|e| Failure(harness::Error::Unavailable(e)))
    }

    /// Runs `work` for `conversation` of the caller's tenant: after the calls before it for that
    /// conversation, on the policy generation current now, on the blocking pool, with the
    /// harness operations on the tenant's home.
    async fn locked<T: Send + 'static>(&self, extensions: &Extensions, conversation: String, work: impl FnOnce(&Harness) -> harness::Result<T> + Send + 'static) -> Answer<T> {
        let tenant = self.tenant(extensions)?;
        let conversation = harness::conversation_key(&conversation)?;
        // The generation is taken before waiting: a call that started before a swap finishes
        // on the policy it started with.
        let generation = self.generation().await?;
        let lock = self.serve.conversation_lock(&tenant, &conversation);
        let _turn = lock.lock().await;
        let mut harness = Harness::new(scoped(&generation.lifecycle, &tenant));
        if self.tenancy != Tenancy::Home {
            harness = harness.refusing_files(NO_FILES_OVER_HTTP);
        }
        blocking(move || work(&harness)).await
    }
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> harness::Result<T> + Send + 'static) -> Answer<T> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Ok(Json(value)),
        Ok(Err(error)) => Err(Failure(error)),
        Err(panic) => Err(Failure(harness::Error::Internal(format!("internal error: {panic}")))),
    }
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
