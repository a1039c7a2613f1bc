//! One module per CLI verb; the agents' verbs (`cairn claude-code …`) under `agents/`.

/// `println!` for human output: the record's text (previews, messages, ids from a transcript)
/// has its control characters escaped, so a transcript cannot drive the terminal.
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", cairn::echo::terminal(&format!($($arg)*)))
    };
}

pub mod agents;
pub mod artifact;
pub mod bench;
pub mod boundary;
pub mod compact;
pub mod context;
pub mod demo;
pub mod doctor;
pub mod eval;
pub mod handover;
pub mod history;
pub mod new;
pub mod pin;
pub mod plugins;
pub mod serve;
pub mod show;
pub mod simulate;
pub mod tokens;
pub mod ui;
pub mod undo;

/// A compaction that committed nothing (every step failed, or the commit policy refused it):
/// the verb has printed its report, and exits with its own status, apart from errors (1) and
/// usage errors (2).
#[derive(Debug)]
pub struct NothingCommitted;

impl NothingCommitted {
    pub const EXIT: u8 = 3;
}

impl std::fmt::Display for NothingCommitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("nothing was committed")
    }
}

impl std::error::Error for NothingCommitted {}
