//! The connection loop `cairn serve --http` and `cairn ui` share: hyper's HTTP/1 under an axum
//! router, with every connection bounded, so one client cannot hold the server's descriptors:
//! - a connection must send a complete request head within `--header-timeout` of opening
//!   (one that sends nothing, or half a request line, is closed);
//! - between requests, a kept-alive connection waits at most `--idle-timeout` for the next;
//! - at most `--max-connections` are open, and `--max-connections-per-ip` from one address:
//!   past either, a new connection is closed at once (logged at WARN).
//!
//! hyper's own `header_read_timeout` also runs while a kept-alive connection waits, so it cannot
//! tell the two limits apart: each connection's watchdog below does, from whether a request is
//! in flight (a call that takes minutes is never cut).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use axum::body::Body;
use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

#[derive(clap::Args, Clone, Copy, Debug)]
pub struct Limits {
    /// Seconds a new connection has to send its request head; closed after.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = seconds)]
    pub header_timeout: Duration,
    /// Seconds a kept-alive connection may wait for its next request; closed after.
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = seconds)]
    pub idle_timeout: Duration,
    /// Connections open at once; more are closed on arrival.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Connections open at once from one client address; more are closed on arrival.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_ip: u32,
}

fn seconds(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!("{text:?}: expected a positive number of seconds")),
    }
}

/// Serves `app` on `listener` until `shutdown` completes; then accepts nothing more, lets each
/// connection finish its request in flight, and returns once all are closed.
pub async fn serve(listener: tokio::net::TcpListener, app: Router, limits: Limits, shutdown: impl Future<Output = ()>) -> Result<()> {
    let open = Arc::new(Semaphore::new(limits.max_connections as usize));
    let per_ip: Arc<Mutex<HashMap<IpAddr, u32>>> = Arc::default();
    let (stopping, _) = tokio::sync::watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors (EMFILE) or a connection reset before accept: wait a
                    // little rather than spin.
                    tracing::warn!("accepting a connection: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            tracing::warn!(%peer, max = limits.max_connections, "refused a connection: --max-connections are open");
            continue;
        };
        let Some(slot) = IpSlot::take(&per_ip, peer.ip(), limits.max_connections_per_ip) else {
            tracing::warn!(%peer, max = limits.max_connections_per_ip, "refused a connection: --max-connections-per-ip are open from this address");
            continue;
        };
        // TCP_NODELAY: a response written in two parts would otherwise wait ~40 ms for the
        // client's delayed ACK (Nagle), on every call.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!("setting TCP_NODELAY: {e}");
        }
        let (app, stopping) = (app.clone(), stopping.subscribe());
        tokio::spawn(async move {
            connection(tcp, peer, app, limits, stopping).await;
            drop((permit, slot));
        });
    }
    // No new connections: the address is given up now, not once the last call has answered.
    drop(listener);
    let _ = stopping.send(true);
    // Every connection holds a permit until it closes.
    let _all_closed = open.acquire_many(limits.max_connections).await;
    Ok(())
}

/// One place among a client address's connections, given back when dropped.
struct IpSlot {
    counts: Arc<Mutex<HashMap<IpAddr, u32>>>,
    ip: IpAddr,
}

impl IpSlot {
    fn take(counts: &Arc<Mutex<HashMap<IpAddr, u32>>>, ip: IpAddr, most: u32) -> Option<IpSlot> {
        let mut map = counts.lock().expect("connections per address");
        let count = map.entry(ip).or_default();
        if *count >= most {
            return None;
        }
        *count += 1;
        Some(IpSlot { counts: counts.clone(), ip })
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut map = self.counts.lock().expect("connections per address");
        if let Some(count) = map.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

/// What a connection's watchdog needs: requests in flight, and since when none has been.
struct Activity {
    state: Mutex<(usize, Instant, bool)>,
    changed: Notify,
}

impl Activity {
    /// When the connection is to be closed, if nothing happens: none while a request is in
    /// flight; the header timeout before its first, the idle timeout after.
    fn deadline(&self, limits: &Limits) -> Option<Instant> {
        let (in_flight, since, served) = *self.state.lock().expect("activity");
        (in_flight == 0).then(|| since + if served { limits.idle_timeout } else { limits.header_timeout })
    }
}

/// A request in flight, from its head until its response's last byte (or the client leaving).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> InFlight {
        activity.state.lock().expect("activity").0 += 1;
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().expect("activity");
        state.0 -= 1;
        if state.0 == 0 {
            *state = (0, Instant::now(), true);
            self.0.changed.notify_one();
        }
    }
}

async fn connection(tcp: tokio::net::TcpStream, peer: SocketAddr, app: Router, limits: Limits, mut stopping: tokio::sync::watch::Receiver<bool>) {
    let activity = Arc::new(Activity { state: Mutex::new((0, Instant::now(), false)), changed: Notify::new() });
    let router = TowerToHyperService::new(app);
    let tracked = activity.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let in_flight = InFlight::start(&tracked);
        let call = hyper::service::Service::call(&router, request);
        async move {
            let response = call.await?;
            // The body owns the guard: the request counts until its last byte is sent.
            Ok::<_, Infallible>(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    let _held = &in_flight;
                    frame
                }))
            }))
        }
    });
    let conn = hyper::server::conn::http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(tcp), service);
    tokio::pin!(conn);
    let watchdog = watch(&activity, &limits);
    tokio::pin!(watchdog);
    let mut stop_asked = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%peer, "connection: {error}");
                }
                return;
            }
            () = &mut watchdog => {
                tracing::debug!(%peer, "closed a connection that sent no request in time");
                return;
            }
            _ = stopping.changed(), if !stop_asked => {
                stop_asked = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Returns when the connection has waited past its deadline with no request in flight.
async fn watch(activity: &Activity, limits: &Limits) {
    loop {
        let changed = activity.changed.notified();
        match activity.deadline(limits) {
            Some(deadline) if deadline <= Instant::now() => return,
            Some(deadline) => tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = changed => {}
            },
            None => changed.await,
        }
    }
}
