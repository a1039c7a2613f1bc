//! Every integration test of this crate in one binary: each test file would otherwise link
//! all of wasmtime again (slow, and gigabytes of disk in a debug build).

mod adapters;
mod agents;
mod authoring;
mod bench;
mod bench_fleet;
mod claude_code;
mod cli;
mod codex;
mod cold_cache;
mod docs;
mod doctor;
mod embedding;
mod eval;
mod fleet;
mod gemini;
mod hook_output;
mod incremental;
mod lifecycle;
mod node_package;
mod opencode;
mod operator;
mod polyglot;
mod python_package;
mod reads;
mod secrets;
mod serve_errors;
mod serve_http;
mod shells;
mod size_limit;
mod support;
mod ui;
mod window;
