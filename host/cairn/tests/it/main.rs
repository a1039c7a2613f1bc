//! Every integration test of this crate in one binary: each test file would otherwise link
//! all of wasmtime again (slow, and gigabytes of disk in a debug build).

mod agent_summaries;
mod archive;
mod chain;
mod contract_versions;
mod fact_check;
mod harness;
mod hostile;
mod incremental;
mod lifecycle;
mod model;
mod module_graph;
mod operator;
mod pipeline;
mod recompaction;
mod robustness;
mod show;
mod support;
mod window;
