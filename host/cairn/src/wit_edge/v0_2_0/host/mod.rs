//! The `Host` impls of contract 0.2.0's imports: one file per capability, each a thin
//! delegation to `crate::capabilities` with conversions from `super::convert`; those the same in
//! every version (`log`, `tokens`, `archive`) come from `same_host_in_every_version`.

mod conversation;
mod model;

crate::wit_edge::same_host_in_every_version::same_host_in_every_version!();

impl super::bindings::types::Host for crate::engine::CallState {}
