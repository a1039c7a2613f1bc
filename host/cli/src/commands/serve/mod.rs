//! `cairn serve`: one warm host speaking the Model Context Protocol over stdio (one client, the
//! home's default tenant) or Streamable HTTP (`--http`: many clients, each bearer token scoped
//! to one tenant), so any harness drives Cairn with the MCP client its ecosystem already has.
//! Plugins are compiled once (from the code cache), the circuit breaker and lifecycle state
//! persist across calls, and the policy can be swapped while it runs. The server answers at
//! once: the plugins load in the background from start-up (seconds from a cold cache, and an
//! agent such as Codex does not wait for a slow server), the calls that run them wait for
//! them, and those that only read storage (`session_history`, `artifact_get`) never do:
//! - `tools.rs`: the tools (harness and agent), their typed arguments and results, shared by
//!   both transports;
//! - `stdio.rs`: the stdio transport (one line a request, the request limit);
//! - `http.rs`: the HTTP transport (bearer tokens, tenants, body limit, graceful shutdown);
//! - `limit.rs`: the JSON-RPC error both answer a request over `--max-request-bytes` with;
//! - `watch.rs`: the policy file and plugin directories, watched for changes.
//!
//! Calls for one conversation are serialized (a mutex here, the conversation's lock across
//! processes); calls for different conversations run in parallel. Each call runs on the
//! policy generation current when it started, so a swap never changes a call in flight.

mod http;
mod limit;
mod stdio;
mod tools;
mod watch;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use anyhow::{Context, Result};
use cairn::record::Notice;
use cairn::storage::{ConversationKey, Home, Tenant};
use cairn::{Lifecycle, Preparing};

use crate::setup;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Expose {
    /// Only the agent's tools (`session_history`, `context_maintenance`): hand them to a model
    /// whose harness calls `boundary` (Pi's extension, OpenCode's plugin), where a maintenance
    /// request is carried out.
    Agent,
    /// Only `session_history`: for agents whose harness never calls `boundary` (Claude Code,
    /// Codex, Gemini CLI hooks), where a `context_maintenance` request would never be carried out.
    Recall,
    /// The harness's tools (compact, handover, boundary, notices, policy…).
    Harness,
    All,
}

#[derive(clap::Args)]
pub struct Args {
    /// Storage home [default: $CAIRN_HOME, else ~/.local/share/cairn].
    #[arg(long)]
    home: Option<PathBuf>,
    /// Policy file (TOML), watched for changes; the embedded default when absent.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Extra plugin directory, watched for changes; may repeat.
    #[arg(long)]
    plugin_dir: Vec<PathBuf>,
    /// Which tools are listed.
    #[arg(long, value_enum, default_value_t = Expose::Harness)]
    expose: Expose,
    /// The conversation the agent tools act on [default: derived from --project].
    #[arg(long)]
    conversation: Option<String>,
    /// The project whose conversation the agent tools act on [default: $CLAUDE_PROJECT_DIR, else
    /// the current directory].
    #[arg(long)]
    project: Option<PathBuf>,
    /// Do not watch the policy file and plugin directories (reload with `policy_reload`).
    #[arg(long)]
    no_watch: bool,
    /// The agent's working directory: compactions stamp the files the conversation touched
    /// there, and `boundary` answers with those changed since (`stale_files`).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Serve MCP over Streamable HTTP on this address (`127.0.0.1:8080`; port 0 picks one)
    /// instead of stdio: the endpoint is `/mcp`, every request needs `Authorization: Bearer
    /// <token>` (`cairn tokens create`), and each token reaches only its tenant's
    /// conversations. `/healthz` answers without a token. Prints `{"listening":"ADDR"}` first.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// Larger requests are refused with a JSON-RPC error naming the limit (over HTTP, with
    /// status 413): a line on stdio, a request body over HTTP.
    #[arg(long, default_value_t = 32 * 1024 * 1024)]
    max_request_bytes: usize,
    /// With --http: no MCP sessions, every POST stands alone, so any node of a fleet behind a
    /// load balancer can serve any call (no sticky sessions needed).
    #[arg(long, requires = "http")]
    stateless: bool,
    #[command(flatten)]
    limits: crate::net::Limits,
}

fn with_workspace(lifecycle: Lifecycle, workspace: Option<&std::path::Path>) -> Lifecycle {
    match workspace {
        Some(dir) => lifecycle.with_workspace(dir),
        None => lifecycle,
    }
}

/// A notice about the server, and the tenants that acknowledged it: one tenant's
/// acknowledgement never hides it from another.
struct ServerNotice {
    notice: Notice,
    acked_by: HashSet<Tenant>,
}

/// One policy generation: the lifecycle (host, plugins, breaker, policy) calls run on.
pub struct Generation {
    pub number: u64,
    pub lifecycle: Lifecycle,
}

/// The writer lock of each conversation of each tenant, made when a call first writes to it.
type ConversationLocks = HashMap<(Tenant, ConversationKey), Arc<tokio::sync::Mutex<()>>>;

/// What every call shares.
pub struct Serve {
    home_path: PathBuf,
    /// The home, opened at start: what only reads or writes storage never waits for the plugins.
    home: Home,
    policy_path: Option<PathBuf>,
    plugin_dirs: Vec<PathBuf>,
    workspace: Option<PathBuf>,
    /// The agent tools' conversation, fixed by the server.
    own: ConversationKey,
    /// Generation 1, loading in the background from start-up; its error (naming the plugin or
    /// the policy) is every engine call's answer if it fails, until a reload succeeds.
    first: Preparing<Arc<Generation>>,
    /// The generation a reload swapped in, in force instead of the first.
    swapped: RwLock<Option<Arc<Generation>>>,
    /// One writer per conversation of each tenant in this process (the storage's lock covers
    /// other processes).
    conversations: Mutex<ConversationLocks>,
    /// Notices about the server itself (policy swapped or refused), until each tenant
    /// acknowledges them.
    notices: Mutex<Vec<ServerNotice>>,
    /// Reloads one at a time (the watcher and `policy_reload`).
    reloading: Mutex<()>,
}

impl Serve {
    fn open(args: &Args) -> Result<Self> {
        let home = setup::home_path(args.home.clone());
        let own = match &args.conversation {
            Some(key) => ConversationKey::parse(key)?,
            None => {
                let project = match &args.project {
                    Some(dir) => dir.canonicalize().with_context(|| format!("--project {}", dir.display()))?,
                    // Claude Code names the project of the MCP servers it starts.
                    None => std::env::var_os("CLAUDE_PROJECT_DIR").map(PathBuf::from).map_or_else(std::env::current_dir, Ok)?,
                };
                setup::project_conversation(&project)
            }
        };
        let opened = Home::open(&home)?;
        let first = {
            let (home, plugin_dirs, policy_path, workspace) = (opened.clone(), args.plugin_dir.clone(), args.policy.clone(), args.workspace.clone());
            Preparing::start("cairn-plugins", move || {
                let started = std::time::Instant::now();
                let loaded = setup::host_and_policy(&plugin_dirs, policy_path.as_deref()).and_then(|(cairn, policy)| {
                    let lifecycle = with_workspace(Lifecycle::new(cairn, home, policy), workspace.as_deref());
                    let owed = lifecycle.deliver_owed_notices()?;
                    Ok((lifecycle, owed))
                });
                match loaded {
                    Ok((lifecycle, owed)) => {
                        tracing::info!(owed, seconds = started.elapsed().as_secs_f64(), "plugins and policy loaded");
                        Ok(Arc::new(Generation { number: 1, lifecycle }))
                    }
                    Err(error) => {
                        tracing::error!("loading the plugins and policy: {error:#}; every call that runs them answers with this error until a reload succeeds");
                        Err(error)
                    }
                }
            })
            .context("starting the thread that loads the plugins")?
        };
        tracing::info!(home = %cairn::storage::shown(&home), conversation = %own, "serving");
        Ok(Serve {
            home_path: home,
            home: opened,
            policy_path: args.policy.clone(),
            plugin_dirs: args.plugin_dir.clone(),
            workspace: args.workspace.clone(),
            own,
            first,
            swapped: RwLock::new(None),
            conversations: Mutex::new(HashMap::new()),
            notices: Mutex::new(Vec::new()),
            reloading: Mutex::new(()),
        })
    }

    /// The generation a call starts on (and finishes on, whatever is swapped meanwhile), once
    /// one is loaded; the first load's error if it failed and nothing replaced it.
    pub async fn generation(&self) -> Result<Arc<Generation>, String> {
        if let Some(swapped) = self.swapped() {
            return Ok(swapped);
        }
        let first = self.first.wait().await.map_err(|error| format!("loading the plugins and policy: {error}"))?;
        // A reload may have swapped another in while this waited.
        Ok(self.swapped().unwrap_or(first))
    }

    /// The generation in force now, without waiting: none while the first is loading or if
    /// its load failed.
    pub fn loaded(&self) -> Option<Arc<Generation>> {
        self.swapped().or_else(|| self.first.ready().and_then(Result::ok))
    }

    fn swapped(&self) -> Option<Arc<Generation>> {
        self.swapped.read().expect("generation lock").clone()
    }

    /// The home as `tenant` sees it (the same storage, every key resolved inside the tenant).
    pub fn home_for(&self, tenant: &Tenant) -> Home {
        if self.home.tenant() == tenant {
            self.home.clone()
        } else {
            self.home.for_tenant(tenant)
        }
    }

    fn conversation_lock(&self, tenant: &Tenant, key: &ConversationKey) -> Arc<tokio::sync::Mutex<()>> {
        self.conversations.lock().expect("conversation locks").entry((tenant.clone(), key.clone())).or_default().clone()
    }

    /// The server's notices `tenant` has not acknowledged yet.
    fn notices_for(&self, tenant: &Tenant) -> Vec<Notice> {
        self.notices.lock().expect("notices").iter().filter(|n| !n.acked_by.contains(tenant)).map(|n| n.notice.clone()).collect()
    }

    /// Acknowledges the server's notices among `ids` for `tenant`; the other ids are returned.
    fn ack_for<'a>(&self, tenant: &Tenant, ids: &'a [String]) -> Vec<&'a String> {
        let mut notices = self.notices.lock().expect("notices");
        let mut theirs = Vec::new();
        for id in ids {
            match notices.iter_mut().find(|n| &n.notice.id == id) {
                Some(notice) => {
                    notice.acked_by.insert(tenant.clone());
                }
                None => theirs.push(id),
            }
        }
        theirs
    }

    /// Checks the policy file (and, with `plugins`, reloads the plugin directories) and swaps
    /// the result in. A refused policy changes nothing; either way a notice says what happened.
    pub fn reload(&self, plugins: bool) -> Result<Arc<Generation>> {
        let _one_at_a_time = self.reloading.lock().expect("reload lock");
        let current = self.loaded();
        let loaded = match &current {
            // The policy alone, on the plugins already loaded.
            Some(current) if !plugins => self.read_policy().and_then(|(text, source)| Ok(current.lifecycle.with_policy(current.lifecycle.cairn().load_policy(&text, &source)?))),
            // With no generation loaded yet (or its load failed), the plugins are loaded too.
            _ => setup::host_and_policy(&self.plugin_dirs, self.policy_path.as_deref())
                .and_then(|(cairn, policy)| Ok(with_workspace(Lifecycle::new(cairn, Home::open(&self.home_path)?, policy), self.workspace.as_deref()))),
        };
        // Generation 1 is the first load's, finished or not.
        let number = current.as_ref().map_or(1, |c| c.number) + 1;
        match loaded {
            Ok(lifecycle) => {
                let generation = Arc::new(Generation { number, lifecycle });
                *self.swapped.write().expect("generation lock") = Some(generation.clone());
                let source = &generation.lifecycle.policy().source;
                tracing::info!(generation = number, %source, "policy swapped");
                self.notify(format!("policy-{number}"), format!("The policy {source} is now in force (generation {number})."));
                Ok(generation)
            }
            Err(error) => {
                tracing::warn!("policy refused: {error:#}");
                let running = match &current {
                    Some(current) => format!("generation {} keeps running", current.number),
                    None => "no policy is in force yet".to_string(),
                };
                self.notify(format!("policy-refused-{number}-{}", cairn::record::now_millis()), format!("The new policy was refused; {running}: {error:#}"));
                Err(error)
            }
        }
    }

    fn read_policy(&self) -> Result<(String, String)> {
        match &self.policy_path {
            Some(path) => Ok((std::fs::read_to_string(path).with_context(|| format!("reading policy {}", path.display()))?, path.display().to_string())),
            None => Ok((cairn::policy::DEFAULT_POLICY.to_string(), "<embedded default policy>".to_string())),
        }
    }

    fn notify(&self, id: String, text: String) {
        self.notices.lock().expect("notices").push(ServerNotice { notice: Notice::new(id, "policy", text), acked_by: HashSet::new() });
    }
}

pub fn run(args: Args) -> Result<()> {
    let serve = Arc::new(Serve::open(&args)?);
    // A warm host: the tokenizer's tables are built now, beside the handshake, not in the first call.
    std::thread::spawn(|| cairn::tokenizer::Tokenizer::default().load());
    let _watcher = if args.no_watch { None } else { Some(watch::start(serve.clone())?) };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match &args.http {
        Some(addr) => runtime.block_on(http::serve_http(serve, args.expose, addr, args.max_request_bytes, args.stateless, args.limits)),
        None => runtime.block_on(stdio::serve(tools::server(serve, args.expose, tools::Tenancy::Home), args.max_request_bytes)),
    }
}
