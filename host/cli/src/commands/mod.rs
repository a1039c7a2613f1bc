//! One module per CLI verb.

pub mod artifact;
pub mod bench;
pub mod claude_code;
pub mod boundary;
pub mod compact;
pub mod demo;
pub mod doctor;
pub mod eval;
pub mod handover;
pub mod history;
pub mod new;
pub mod plugins;
pub mod serve;
pub mod simulate;
