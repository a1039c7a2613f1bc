//! Turning what went wrong inside a call into a stable failure class.

use wasmtime::Trap;

use super::CallState;
use crate::capabilities::Refusal;

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
    // Too many memories, tables or instances for the limiter: wasmtime's own words.
    if state.memory.exceeded || error.root_cause().to_string().contains("resource limit exceeded") {
        return CallFailure::Oom(format!("exceeded its memory cap of {} MiB", state.memory.max_bytes >> 20));
    }
    let deadline_passed = std::time::Instant::now() >= state.deadline;
    if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) || state.model.timed_out || state.tokens.timed_out || deadline_passed {
        return CallFailure::Timeout;
    }
    if let Some(refusal) = error.downcast_ref::<Refusal>() {
        return CallFailure::Denied(refusal.to_string());
    }
    // The root cause (e.g. "wasm trap: wasm `unreachable` instruction executed") is stable
    // and short; the backtrace goes to the debug log.
    tracing::debug!(plugin = %state.plugin, "trap detail: {error:?}");
    let trap = error.root_cause().to_string();
    // A trap says only where the machine stopped; the guest's last words say why (an SDK logs
    // an uncaught exception with the author's source lines, a runtime writes it to stderr).
    // Their lines are joined and control characters blanked: the message reaches terminals.
    let printable = |text: &str| text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" | ").replace(char::is_control, " ");
    match (&state.log.last_error, state.stderr_tail()) {
        (Some(logged), _) => CallFailure::Trap(format!("{trap} — it logged: {}", printable(logged))),
        (None, Some(stderr)) => CallFailure::Trap(format!("{trap} — its stderr ended: {}", printable(&stderr))),
        (None, None) => CallFailure::Trap(trap),
    }
}
