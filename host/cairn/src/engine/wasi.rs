//! WASI for the components that import it: wasmtime's WASI 0.2 with the deny-all context of
//! [`CallState`](super::CallState), plus one change. Host calls run outside epoch
//! interruption, so a guest sleeping in `wasi:io/poll` would outlive its deadline (a probe
//! slept 30 s against a 1 s timeout): every clock subscription is clamped to the call's
//! deadline, so a poll returns by then and the guest traps at its next instruction.

use std::time::Instant;

use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::clocks::WasiClocksView;
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock::Host as MonotonicClock;
use wasmtime_wasi::p2::DynPollable;

use super::CallState;

/// The version of `wasi:clocks` wasmtime-wasi links (its `subscribe-*` are shadowed by name).
const MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

pub fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    linker.allow_shadowing(true);
    let mut clock = linker.instance(MONOTONIC_CLOCK)?;
    clock.func_wrap("subscribe-duration", |mut store, (nanos,): (u64,)| -> wasmtime::Result<(Resource<DynPollable>,)> {
        let state: &mut CallState = store.data_mut();
        let nanos = nanos.min(left_nanos(state.deadline));
        Ok((state.clocks().subscribe_duration(nanos)?,))
    })?;
    clock.func_wrap("subscribe-instant", |mut store, (when,): (u64,)| -> wasmtime::Result<(Resource<DynPollable>,)> {
        let state: &mut CallState = store.data_mut();
        let mut clocks = state.clocks();
        let latest = clocks.now()?.saturating_add(left_nanos(state.deadline));
        Ok((state.clocks().subscribe_instant(when.min(latest))?,))
    })?;
    linker.allow_shadowing(false);
    Ok(())
}

fn left_nanos(deadline: Instant) -> u64 {
    u64::try_from(deadline.saturating_duration_since(Instant::now()).as_nanos()).unwrap_or(u64::MAX)
}
