//! `cairn serve --http ADDR`: the same tools over MCP's Streamable HTTP transport (rmcp's
//! `StreamableHttpService`, stateful sessions), behind axum:
//! - `GET /healthz`: `ok` without a token while the storage home can be listed, else 503;
//! - `/mcp`: every request needs `Authorization: Bearer <token>`. The token is checked before
//!   any rmcp or Cairn code runs (401 with `WWW-Authenticate: Bearer` otherwise), and its tenant
//!   and scope ride in the request's extensions to the tools, which resolve everything inside
//!   the tenant (the node-wide tools need an operator's token);
//! - bodies over `--max-request-bytes` are refused with 413 and a JSON-RPC error naming the
//!   limit (with the request's id when its head was read);
//! - connections are bounded (`crate::net`: header and idle timeouts, caps in all and per address);
//! - SIGTERM or Ctrl-C: no new connections, the calls in flight finish, then exit 0.
//!
//! Storage calls (token checks, health) run on the blocking pool, as the tools' do.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use http_body_util::BodyExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::signal::unix::{signal, SignalKind};

use super::limit;
use super::tools::{self, Caller, Tenancy};
use super::{Expose, Serve};

/// A refused request's body is read and discarded before the answer (up to the body limit for
/// a 401, up to this many bytes for a 413, and for at most `DRAIN_TIME`): a client that sends
/// its whole body before reading the answer (most do) gets the answer rather than a reset
/// connection. Past that the connection is closed.
const DRAIN_BYTES: u64 = 256 * 1024 * 1024;
const DRAIN_TIME: Duration = Duration::from_secs(30);

/// What the HTTP layers share.
struct Http {
    serve: Arc<Serve>,
    max_request_bytes: usize,
    /// MCP POSTs whose response has not been sent in full yet.
    in_flight: tokio::sync::watch::Sender<usize>,
}

pub async fn serve_http(serve: Arc<Serve>, expose: Expose, addr: &str, max_request_bytes: usize, stateless: bool, limits: crate::net::Limits) -> Result<()> {
    // Handlers first: a signal that arrives once the address is printed is never the default
    // (immediate death).
    let mut terminate = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("listening on {addr}"))?;
    let local = listener.local_addr()?;

    let config = StreamableHttpServerConfig::default()
        // rmcp's Host allow-list guards unauthenticated local servers against DNS rebinding;
        // here every /mcp request needs a bearer token a rebinding page cannot have, and a
        // deployment behind a load balancer answers to its own host names.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(max_request_bytes)
        .with_legacy_session_mode(!stateless)
        .with_json_response(stateless);
    // Cancelled once the calls in flight have answered: it ends the sessions' open streams
    // (a client's GET stream would otherwise hold the shutdown forever).
    let sessions_done = config.cancellation_token.clone();
    let template = tools::server(serve.clone(), expose, Tenancy::PerRequest);
    let mcp = StreamableHttpService::new(move || Ok(template.for_session()), Arc::new(LocalSessionManager::default()), config);

    let state = Arc::new(Http { serve, max_request_bytes, in_flight: tokio::sync::watch::Sender::new(0) });
    let app = Router::new()
        .route_service("/mcp", mcp)
        // The last layer runs first: count, authenticate, limit the body, then check it is a
        // JSON-RPC message.
        .layer(middleware::from_fn_with_state(state.clone(), json_rpc_shape))
        .layer(middleware::from_fn_with_state(state.clone(), limit_body))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(middleware::from_fn_with_state(state.clone(), count_in_flight))
        .route("/healthz", get(healthz))
        .with_state(state.clone());

    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", serde_json::json!({ "listening": local.to_string() }))?;
    stdout.flush()?;
    drop(stdout);
    tracing::info!(%local, max_request_bytes, "serving MCP over HTTP at /mcp");

    let mut in_flight = state.in_flight.subscribe();
    let shutdown = async move {
        let name = tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        };
        tracing::info!("{name}: no new connections; finishing the calls in flight");
        tokio::spawn(async move {
            let _ = in_flight.wait_for(|n| *n == 0).await;
            sessions_done.cancel();
        });
    };
    crate::net::serve(listener, app, limits, shutdown).await.context("serving HTTP")?;
    tracing::info!("stopped");
    Ok(())
}

async fn healthz(State(state): State<Arc<Http>>) -> Response {
    let home = state.serve.home.clone();
    match tokio::task::spawn_blocking(move || home.conversations()).await {
        Ok(Ok(_)) => (StatusCode::OK, "ok").into_response(),
        Ok(Err(error)) => {
            tracing::warn!("health check: the storage home cannot be listed: {error:#}");
            (StatusCode::SERVICE_UNAVAILABLE, "storage unavailable").into_response()
        }
        Err(panic) => {
            tracing::warn!("health check: {panic}");
            (StatusCode::SERVICE_UNAVAILABLE, "storage unavailable").into_response()
        }
    }
}

/// Checks the bearer token before anything else sees the request; its tenant goes into the
/// request's extensions for the tools.
async fn authenticate(State(state): State<Arc<Http>>, mut request: Request, next: Next) -> Response {
    let Some(secret) = bearer(request.headers()) else {
        drain(request.into_body(), state.max_request_bytes as u64).await;
        return unauthorized(None, "a bearer token is required (Authorization: Bearer <token>)");
    };
    let home = state.serve.home.clone();
    match tokio::task::spawn_blocking(move || home.tokens().verify(&secret)).await {
        Ok(Ok(Some(credential))) => {
            request.extensions_mut().insert(Caller(credential));
            next.run(request).await
        }
        Ok(Ok(None)) => {
            drain(request.into_body(), state.max_request_bytes as u64).await;
            unauthorized(Some("invalid_token"), "the bearer token is unknown or revoked")
        }
        Ok(Err(error)) => {
            tracing::error!("checking a bearer token: {error:#}");
            json_error(StatusCode::SERVICE_UNAVAILABLE, serde_json::json!({ "error": "the token store is unavailable" }))
        }
        Err(panic) => {
            tracing::error!("checking a bearer token: {panic}");
            json_error(StatusCode::INTERNAL_SERVER_ERROR, serde_json::json!({ "error": "internal error" }))
        }
    }
}

/// The token of `Authorization: Bearer <token>` (the scheme in any case).
fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_string())
}

fn unauthorized(error: Option<&str>, message: &str) -> Response {
    let challenge = match error {
        Some(error) => format!("Bearer realm=\"cairn\", error=\"{error}\""),
        None => "Bearer realm=\"cairn\"".to_string(),
    };
    let mut response = json_error(StatusCode::UNAUTHORIZED, serde_json::json!({ "error": message }));
    response.headers_mut().insert(header::WWW_AUTHENTICATE, challenge.parse().expect("a valid header value"));
    response
}

fn json_error(status: StatusCode, body: serde_json::Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// 413 with the JSON-RPC error of a body of `bytes` bytes (if known) whose first bytes are `head`.
fn too_large(head: &[u8], bytes: Option<u64>, limit: usize) -> Response {
    json_error(StatusCode::PAYLOAD_TOO_LARGE, limit::over_limit(limit::request_id(head), bytes, limit))
}

/// Refuses bodies over the limit: at once when `Content-Length` says so (after draining what
/// was sent), and while streaming otherwise (rmcp counts; its 413 gets our body). Either way
/// the body's head is kept for the request's id.
async fn limit_body(State(state): State<Arc<Http>>, request: Request, next: Next) -> Response {
    let limit = state.max_request_bytes;
    let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        tracing::warn!(declared, limit, "refused a request body over the limit");
        let head = drain(request.into_body(), DRAIN_BYTES).await;
        return too_large(&head, declared, limit);
    }
    let head = Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = head.clone();
    let request = request.map(|body| {
        Body::new(body.map_frame(move |frame| {
            if let Some(data) = frame.data_ref() {
                keep_head(&mut kept.lock().expect("body head"), data);
            }
            frame
        }))
    });
    let response = next.run(request).await;
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE {
        let head = head.lock().expect("body head").clone();
        return too_large(&head, None, limit);
    }
    response
}

fn keep_head(head: &mut Vec<u8>, data: &[u8]) {
    let room = limit::HEAD_BYTES.saturating_sub(head.len());
    head.extend_from_slice(&data[..room.min(data.len())]);
}

/// Reads and discards a body, up to `most` bytes or `DRAIN_TIME`; returns its head.
async fn drain(mut body: Body, most: u64) -> Vec<u8> {
    let mut head = Vec::new();
    let discard = async {
        let mut seen = 0u64;
        while let Some(Ok(frame)) = body.frame().await {
            if let Some(data) = frame.data_ref() {
                keep_head(&mut head, data);
                seen += data.len() as u64;
            }
            if seen > most {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, discard).await;
    head
}

/// Counts the MCP POSTs (the calls) until their response has been sent in full, so shutdown
/// waits for them before it ends the sessions.
async fn count_in_flight(State(state): State<Arc<Http>>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    state.in_flight.send_modify(|n| *n += 1);
    let guard = InFlight(state.clone());
    let response = next.run(request).await;
    // The body owns the guard: the call counts until its last byte is sent (or the client
    // goes away).
    response.map(|body| {
        Body::new(body.map_frame(move |frame| {
            let _held = &guard;
            frame
        }))
    })
}

/// Holds its call's place among those in flight until dropped with the response body.
struct InFlight(Arc<Http>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.send_modify(|n| *n -= 1);
    }
}

/// A POST whose body is not JSON gets JSON-RPC's parse error (-32700), and one that is JSON but
/// not a JSON-RPC message its invalid request (-32600), both with status 400 and a null id,
/// rather than rmcp's plain-text 415. The body is read whole here, as rmcp reads it anyway.
async fn json_rpc_shape(State(state): State<Arc<Http>>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match http_body_util::Limited::new(body, state.max_request_bytes).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return too_large(b"", None, state.max_request_bytes),
    };
    let refusal = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Err(error) => Some(limit::malformed(limit::PARSE_ERROR, format!("the body is not JSON: {error}"))),
        Ok(message) if !limit::is_message(&message) => {
            Some(limit::malformed(limit::INVALID_REQUEST, "the body is JSON but not a JSON-RPC 2.0 message (an object with \"jsonrpc\": \"2.0\" and a method, or a result or error)".into()))
        }
        Ok(_) => None,
    };
    match refusal {
        Some(error) => json_error(StatusCode::BAD_REQUEST, error),
        None => next.run(Request::from_parts(parts, Body::from(bytes))).await,
    }
}
