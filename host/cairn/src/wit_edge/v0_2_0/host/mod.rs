//! The `Host` impls of contract 0.2.0's imports: one file per capability, each a thin
//! delegation to `crate::capabilities` with conversions from `super::convert`.

mod archive;
mod conversation;
mod log;
mod model;
mod tokens;

impl super::bindings::types::Host for crate::engine::CallState {}
