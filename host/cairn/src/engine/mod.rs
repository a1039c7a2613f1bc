//! The Wasm runtime: one `wasmtime::Engine` per process, an epoch ticker for deadlines, and
//! a fresh `Store` per call so a trapped instance is never re-entered. The linkers for each
//! contract version live in `wit_edge`.

mod cache;
mod call;
mod state;
pub mod wasi;

pub use cache::{CodeCache, Compiled};

pub use call::{classify, CallFailure};
pub use state::{CallState, Services};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

/// How often the epoch advances; deadlines are whole ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The shared runtime. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    engine: wasmtime::Engine,
    cache: Option<CodeCache>,
    ticker_stop: Arc<AtomicBool>,
}

/// Which plugin world a component implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum World {
    Trigger,
    Strategy,
    CommitPolicy,
}

impl std::fmt::Display for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            World::Trigger => "trigger",
            World::Strategy => "strategy",
            World::CommitPolicy => "commit-policy",
        })
    }
}

impl Engine {
    /// An engine caching compiled code in [`CodeCache::default_dir`].
    pub fn new() -> Result<Self> {
        Self::with_cache(CodeCache::default_dir())
    }

    /// An engine caching compiled code in `cache_dir`, or compiling every time without one.
    pub fn with_cache(cache_dir: Option<std::path::PathBuf>) -> Result<Self> {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        // wasmtime's default reservation for a 32-bit memory (4 GiB and a guard region) lets
        // compiled guest code leave out its bounds checks: the guard pages trap instead. A
        // reservation is address space, not memory (the cap is `MemoryCap`'s); the 1 GiB one
        // this replaced made shake-elide 1.1–1.25× slower (`cairn bench`, alternated runs).
        // `CAIRN_PROFILE=perfmap`: guest functions named in /tmp/perf-<pid>.map for `perf report`.
        if std::env::var("CAIRN_PROFILE").as_deref() == Ok("perfmap") {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = wasmtime::Engine::new(&config)?;

        let ticker_stop = Arc::new(AtomicBool::new(false));
        spawn_ticker(engine.clone(), ticker_stop.clone());
        let cache = cache_dir.map(|dir| CodeCache::new(dir, &engine));
        Ok(Engine { inner: Arc::new(Inner { engine, cache, ticker_stop }) })
    }

    pub fn wasmtime(&self) -> &wasmtime::Engine {
        &self.inner.engine
    }

    /// Compiles a component (whose hex sha256 is `sha256`), or loads it from the code cache.
    pub fn component(&self, bytes: &[u8], sha256: &str) -> wasmtime::Result<(wasmtime::component::Component, Compiled)> {
        match &self.inner.cache {
            Some(cache) => cache.component(&self.inner.engine, bytes, sha256),
            None => Ok((wasmtime::component::Component::new(&self.inner.engine, bytes)?, Compiled::Fresh)),
        }
    }

    /// Whether the code cache holds this engine's compiled code for the component whose bytes
    /// hash to `sha256` (hex); never without a cache.
    pub fn holds_compiled(&self, sha256: &str) -> bool {
        self.inner.cache.as_ref().is_some_and(|cache| cache.holds(sha256))
    }

    /// A fresh store for one call: the state's memory cap enforced, the deadline armed.
    pub fn store(&self, state: CallState, timeout: Duration) -> wasmtime::Store<CallState> {
        let mut store = wasmtime::Store::new(&self.inner.engine, state);
        store.limiter(|s| &mut s.memory);
        store.set_epoch_deadline(Self::ticks(timeout));
        store
    }

    /// Epoch ticks for a deadline, rounded up.
    pub fn ticks(timeout: Duration) -> u64 {
        (timeout.as_micros() / EPOCH_TICK.as_micros()).max(1) as u64 + 1
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

fn spawn_ticker(engine: wasmtime::Engine, stop: Arc<AtomicBool>) {
    std::thread::Builder::new()
        .name("cairn-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        })
        .expect("spawning the epoch ticker thread");
}
