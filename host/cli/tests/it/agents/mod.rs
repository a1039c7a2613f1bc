//! The conformance suite: the real agent CLIs (pinned, from npm) with Cairn installed as a user
//! installs it, driven in their non-interactive modes against our scripted model server on
//! 127.0.0.1, asserting on what each agent sends the model after compaction.

mod claude_code;
mod codex;
mod gemini;
mod model_server;
mod npm;
mod opencode;
mod pi;
