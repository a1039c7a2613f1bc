//! `cairn ui`: a local page to look at what compaction did — the home's conversations, each
//! one's timeline (compactions, undos, pins, a token chart) and each compaction before and
//! after (kept, summarized, elided, dropped, the summaries, every step's outcome), with the
//! stored originals one click away. It can take the last compaction back and pin or unpin
//! entries.
//!
//! It binds a loopback address only (a random port by default) and every request needs the
//! random token of the URL it prints (401 otherwise): another local user, or a web page the
//! operator visits, cannot read the record or undo through it.
//!
//! Routes (all `?token=…`): `/` the page (plain HTML and JS, `page.html`, `app.js`),
//! `/api/conversations`, `/api/timeline?conversation=K`, `/api/compaction?conversation=K&archive=A`,
//! `POST /api/undo?conversation=K`, `POST /api/pin?conversation=K&id=I&pinned=true|false`,
//! `/artifact?uri=artifact://…` (the original's bytes, text/plain). Storage calls block, so they
//! run on the blocking pool; writes go one at a time. Connections are bounded as `serve --http`'s
//! are (`crate::net`).

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use cairn::pins::PinSettings;
use cairn::storage::{ArtifactUri, ConversationKey, Home};
use cairn::tokenizer::Tokenizer;
use cairn::transcript::Transcript;
use serde::Serialize;
use tokio::signal::unix::{signal, SignalKind};

use crate::setup;

const PAGE: &str = include_str!("page.html");
const APP: &str = include_str!("app.js");

/// The page allows its own inline script and style and requests to this server, nothing else.
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

#[derive(clap::Args)]
pub struct Args {
    /// Cairn's home (default: $CAIRN_HOME, else ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// Where to listen: a loopback address only (127.0.0.1, ::1); port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: String,
    /// Print one JSON line `{"url": …, "port": …}` instead of the sentence.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    limits: crate::net::Limits,
}

struct Ui {
    home: Home,
    token: String,
    tokenizer: Tokenizer,
    /// Undo and pin write the record: one at a time.
    writing: Mutex<()>,
}

pub fn run(args: Args) -> Result<()> {
    let addr = loopback(&args.addr)?;
    let home = Home::open(&setup::home_path(args.home))?;
    let ui = Arc::new(Ui { home, token: random_token()?, tokenizer: Tokenizer::default(), writing: Mutex::new(()) });
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve(ui, addr, args.json, args.limits))
}

/// `addr` as a socket address whose IP is a loopback one; anything else is refused.
fn loopback(addr: &str) -> Result<SocketAddr> {
    let parsed: SocketAddr = addr.parse().with_context(|| format!("--addr {addr:?}: expected IP:PORT, such as 127.0.0.1:0 or [::1]:8080"))?;
    if !parsed.ip().is_loopback() {
        bail!("--addr {addr}: cairn ui listens on a loopback address only (127.0.0.1 or ::1): the page reads the record and can undo compactions");
    }
    Ok(parsed)
}

/// 128 random bits, as 32 hex digits.
fn random_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness for the page's token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

async fn serve(ui: Arc<Ui>, addr: SocketAddr, json: bool, limits: crate::net::Limits) -> Result<()> {
    // Handlers first: a signal that arrives once the URL is printed is never the default.
    let mut terminate = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("listening on {addr}"))?;
    let local = listener.local_addr()?;
    let url = format!("http://{local}/?token={}", ui.token);

    let app = Router::new()
        .route("/", get(page))
        .route("/api/conversations", get(conversations))
        .route("/api/timeline", get(timeline))
        .route("/api/compaction", get(compaction))
        .route("/api/undo", post(undo))
        .route("/api/pin", post(pin))
        .route("/artifact", get(artifact))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found") })
        .layer(middleware::from_fn_with_state(ui.clone(), authenticate))
        .with_state(ui);

    let mut stdout = std::io::stdout().lock();
    if json {
        writeln!(stdout, "{}", serde_json::json!({ "url": url, "port": local.port() }))?;
    } else {
        writeln!(stdout, "Cairn's page: {url}\n(only this URL's token opens it; Ctrl-C stops the server)")?;
    }
    stdout.flush()?;
    drop(stdout);

    let shutdown = async move {
        let name = tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        };
        tracing::info!("{name}: stopping");
    };
    crate::net::serve(listener, app, limits, shutdown).await.context("serving the page")?;
    Ok(())
}

/// Every route needs `?token=` (or `X-Cairn-Token:`) equal to the server's.
async fn authenticate(State(ui): State<Arc<Ui>>, request: Request, next: Next) -> Response {
    let given = query(request.uri()).remove("token").or_else(|| request.headers().get("x-cairn-token").and_then(|v| v.to_str().ok()).map(str::to_string));
    match given {
        Some(given) if same(given.as_bytes(), ui.token.as_bytes()) => {
            let mut response = next.run(request).await;
            let headers = response.headers_mut();
            headers.insert(header::REFERRER_POLICY, header::HeaderValue::from_static("no-referrer"));
            headers.insert(header::X_CONTENT_TYPE_OPTIONS, header::HeaderValue::from_static("nosniff"));
            headers.insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
            response
        }
        _ => (StatusCode::UNAUTHORIZED, "this page needs the token of the URL `cairn ui` printed\n").into_response(),
    }
}

/// Equal in constant time (for equal lengths).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn page() -> Response {
    let html = PAGE.replace("/*APP*/", APP);
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CONTENT_SECURITY_POLICY, CSP)], html).into_response()
}

/// Runs a storage call on the blocking pool; its error is the response (400: the request
/// named something that is not there or not allowed).
async fn blocking<T: Send + 'static>(ui: &Arc<Ui>, work: impl FnOnce(&Ui) -> Result<T> + Send + 'static) -> Result<T, Response> {
    let ui = ui.clone();
    match tokio::task::spawn_blocking(move || work(&ui)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(json_response(StatusCode::BAD_REQUEST, &serde_json::json!({ "error": format!("{error:#}") }))),
        Err(panic) => {
            tracing::error!("cairn ui: {panic}");
            Err(json_response(StatusCode::INTERNAL_SERVER_ERROR, &serde_json::json!({ "error": "internal error" })))
        }
    }
}

fn json_response<T: Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (status, [(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{error}")).into_response(),
    }
}

/// The query string's parameters, percent-decoded (`+` is a space); the last of a name wins.
fn query(uri: &Uri) -> HashMap<String, String> {
    uri.query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(b) => {
                    out.push(b);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn required(q: &mut HashMap<String, String>, name: &str) -> Result<String> {
    q.remove(name).ok_or_else(|| anyhow::anyhow!("the request needs ?{name}="))
}

fn conversation(q: &mut HashMap<String, String>) -> Result<ConversationKey> {
    Ok(ConversationKey::parse(&required(q, "conversation")?)?)
}

fn json<T: Serialize>(result: Result<T, Response>) -> Response {
    match result {
        Ok(value) => json_response(StatusCode::OK, &value),
        Err(response) => response,
    }
}

/// One line of the conversations page.
#[derive(Serialize)]
struct ConversationLine {
    conversation: String,
    compactions: usize,
    /// Compactions standing (committed, not undone).
    standing: usize,
    undos: usize,
    tokens_now: u64,
    /// When the last compaction, undo or pin happened (ms since the epoch).
    last_at: Option<u64>,
}

async fn conversations(State(ui): State<Arc<Ui>>) -> Response {
    json(
        blocking(&ui, |ui| {
            let mut lines = Vec::new();
            for key in ui.home.conversations()? {
                let store = ui.home.existing_conversation(&key)?;
                let timeline = cairn::show::timeline(&store);
                let (mut compactions, mut undos, mut last_at) = (0, 0, None);
                for moment in &timeline.moments {
                    let at = match moment {
                        cairn::show::Moment::Compaction { at, .. } => {
                            compactions += 1;
                            *at
                        }
                        cairn::show::Moment::Undo { at, .. } => {
                            undos += 1;
                            *at
                        }
                        cairn::show::Moment::Pin { at, .. } => *at,
                    };
                    last_at = last_at.max(Some(at));
                }
                lines.push(ConversationLine { conversation: key.to_string(), compactions, standing: store.standing().len(), undos, tokens_now: tokens_now(ui, &store)?, last_at });
            }
            Ok(lines)
        })
        .await,
    )
}

fn tokens_now(ui: &Ui, store: &cairn::storage::ConversationStore) -> Result<u64> {
    let mut context = Transcript::new(store.context()?);
    ui.tokenizer.count_transcript(&mut context);
    Ok(context.total_tokens())
}

#[derive(Serialize)]
struct PinnedEntry {
    id: String,
    /// The entry's text as the context holds it now (absent: no longer in the context).
    preview: Option<String>,
}

#[derive(Serialize)]
struct TimelinePage {
    #[serde(flatten)]
    timeline: cairn::show::Timeline,
    tokens_now: u64,
    pinned_entries: Vec<PinnedEntry>,
}

async fn timeline(State(ui): State<Arc<Ui>>, uri: Uri) -> Response {
    let mut q = query(&uri);
    json(
        blocking(&ui, move |ui| {
            let store = ui.home.existing_conversation(&conversation(&mut q)?)?;
            let timeline = cairn::show::timeline(&store);
            let context = store.context()?;
            let pinned_entries = timeline.pinned.iter().map(|id| PinnedEntry { id: id.clone(), preview: context.iter().find(|e| &e.id == id).map(|e| preview(&e.model_text())) }).collect();
            Ok(TimelinePage { tokens_now: tokens_now(ui, &store)?, timeline, pinned_entries })
        })
        .await,
    )
}

fn preview(text: &str) -> String {
    match text.char_indices().nth(160) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

async fn compaction(State(ui): State<Arc<Ui>>, uri: Uri) -> Response {
    let mut q = query(&uri);
    json(
        blocking(&ui, move |ui| {
            let store = ui.home.existing_conversation(&conversation(&mut q)?)?;
            cairn::show::compaction(&store, &required(&mut q, "archive")?)
        })
        .await,
    )
}

/// `?conversation=K[&archive=A]`: takes back compaction A (by default the latest standing) and
/// every later one.
async fn undo(State(ui): State<Arc<Ui>>, uri: Uri) -> Response {
    let mut q = query(&uri);
    json(
        blocking(&ui, move |ui| {
            let _one = ui.writing.lock().unwrap_or_else(|e| e.into_inner());
            let mut store = ui.home.existing_conversation_to_write(&conversation(&mut q)?)?;
            cairn::undo::undo(&mut store, &ui.tokenizer, None, q.remove("archive").as_deref())
        })
        .await,
    )
}

#[derive(Serialize)]
struct Pinned {
    id: String,
    pinned: bool,
}

/// `?conversation=K&id=I&pinned=true|false`.
async fn pin(State(ui): State<Arc<Ui>>, uri: Uri) -> Response {
    let mut q = query(&uri);
    json(
        blocking(&ui, move |ui| {
            let key = conversation(&mut q)?;
            let id = required(&mut q, "id")?;
            let pinned = match required(&mut q, "pinned")?.as_str() {
                "true" => true,
                "false" => false,
                other => bail!("pinned={}: expected true or false", cairn::echo::input(other)),
            };
            let _one = ui.writing.lock().unwrap_or_else(|e| e.into_inner());
            let mut store = ui.home.existing_conversation_to_write(&key)?;
            let ids = vec![id.clone()];
            if pinned {
                cairn::pins::pin(&mut store, &ui.tokenizer, &ids, &PinSettings::default())?;
            } else {
                cairn::pins::unpin(&mut store, &ids)?;
            }
            Ok(Pinned { id, pinned })
        })
        .await,
    )
}

/// `?uri=artifact://…[&conversation=K]`.
async fn artifact(State(ui): State<Arc<Ui>>, uri: Uri) -> Response {
    let mut q = query(&uri);
    let found = blocking(&ui, move |ui| {
        let uri: ArtifactUri = required(&mut q, "uri")?.parse()?;
        match &q.remove("conversation") {
            Some(key) => ui.home.existing_conversation(&ConversationKey::parse(key)?)?.read_artifact(&uri),
            None => ui.home.find_artifact(&uri),
        }
    })
    .await;
    match found {
        // Plain text, never rendered: an original may hold anything.
        Ok(bytes) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8"), (header::CONTENT_SECURITY_POLICY, "sandbox")], bytes).into_response(),
        Err(response) => response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_accepted() {
        assert!(loopback("127.0.0.1:0").is_ok());
        assert!(loopback("[::1]:8080").is_ok());
        let refused = loopback("0.0.0.0:8080").unwrap_err().to_string();
        assert!(refused.contains("loopback"), "{refused}");
        assert!(loopback("192.168.1.2:80").is_err());
        assert!(loopback("localhost").is_err());
    }

    #[test]
    fn query_strings_are_percent_decoded() {
        let q = query(&"/artifact?uri=artifact%3A%2F%2Fa-1%2F2&conversation=my+key&bad=%zz&end=%4".parse().unwrap());
        assert_eq!(q["uri"], "artifact://a-1/2");
        assert_eq!(q["conversation"], "my key");
        assert_eq!(q["bad"], "%zz");
        assert_eq!(q["end"], "%4");
    }

    #[test]
    fn tokens_are_32_hex_digits_and_differ() {
        let (a, b) = (random_token().unwrap(), random_token().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert!(same(a.as_bytes(), a.as_bytes()) && !same(a.as_bytes(), b.as_bytes()));
    }
}
