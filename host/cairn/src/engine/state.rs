//! What a single plugin call's `Store` holds: its limits, its grants and the capability state.

use wasmtime::ResourceLimiter;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};

use std::sync::Arc;
use std::time::Instant;

use crate::capabilities::{ArchiveScope, Grants, LogBudget};
use crate::model::ModelProvider;
use crate::tokenizer::Tokenizer;

/// Guest output captured from WASI stdout/stderr is kept up to this many bytes.
const CAPTURED_OUTPUT_BYTES: usize = 64 * 1024;

pub struct CallState {
    /// `name@version`, for logs and errors.
    pub plugin: String,
    pub memory: MemoryCap,
    pub grants: Grants,
    pub tokenizer: Tokenizer,
    pub archive: ArchiveScope,
    pub model: Option<Arc<dyn ModelProvider>>,
    /// When this call must be over; host calls (the model) stop by then too.
    pub deadline: Instant,
    pub log: LogBudget,
    /// Set when the plugin tried a capability it was not granted.
    pub denied: Option<String>,
    /// Set when a model call ran out of time: the step then ends as `timeout`.
    pub model_timed_out: bool,
    wasi: WasiCtx,
    table: ResourceTable,
}

impl CallState {
    pub fn new(plugin: String, memory_bytes: usize, grants: Grants, tokenizer: Tokenizer, archive: ArchiveScope, model: Option<Arc<dyn ModelProvider>>, deadline: Instant) -> Self {
        // Deny-all WASI: no preopens, env, args or network; output captured, bounded.
        let wasi = WasiCtx::builder()
            .stdout(MemoryOutputPipe::new(CAPTURED_OUTPUT_BYTES))
            .stderr(MemoryOutputPipe::new(CAPTURED_OUTPUT_BYTES))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        CallState {
            plugin,
            memory: MemoryCap { max_bytes: memory_bytes, exceeded: false },
            grants,
            tokenizer,
            archive,
            model,
            deadline,
            log: LogBudget::default(),
            denied: None,
            model_timed_out: false,
            wasi,
            table: ResourceTable::new(),
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Caps linear memory per call and remembers whether the cap was hit, so the failure is
/// reported as `oom` rather than a generic trap.
pub struct MemoryCap {
    pub max_bytes: usize,
    pub exceeded: bool,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.exceeded = true;
            wasmtime::bail!("out of memory: the plugin asked for {desired} bytes, its cap is {}", self.max_bytes);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}
