//! Turning what went wrong inside a call into a stable failure class.

use wasmtime::Trap;

use super::CallState;

/// Why a plugin call produced no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFailure {
    Trap(String),
    Timeout,
    Oom(String),
    Denied(String),
}

/// Classifies an error from instantiating or calling a plugin.
pub fn classify(error: &wasmtime::Error, state: &CallState) -> CallFailure {
    if state.memory.exceeded {
        return CallFailure::Oom(format!("exceeded its memory cap of {} MiB", state.memory.max_bytes >> 20));
    }
    if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) || state.model_timed_out {
        return CallFailure::Timeout;
    }
    if let Some(denied) = &state.denied {
        return CallFailure::Denied(denied.clone());
    }
    // The root cause (e.g. "wasm trap: wasm `unreachable` instruction executed") is stable
    // and short; the backtrace goes to the debug log.
    tracing::debug!(plugin = %state.plugin, "trap detail: {error:?}");
    CallFailure::Trap(error.root_cause().to_string())
}
