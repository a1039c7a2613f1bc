//! Cairn inside each agent, one folder per agent: its verbs (`cairn <agent> install`, the hook
//! handlers), its configuration files and how its session is read back. `shared` is what
//! several of them have in common.

pub mod claude_code;
pub mod codex;
pub mod gemini;
pub mod opencode;
pub(crate) mod shared;
