//! What a transcript format is to Cairn: a name, a way to know its files, a reader and (where
//! Cairn may write it) a writer. Each format Cairn ships implements [`TranscriptFormat`] in its
//! own file; [`Format`] is the handle the rest of the host passes around.

use std::fmt;

use serde_json::Value;

use super::TranscriptError;
use crate::transcript::Transcript;

/// One transcript format. Implement it in one file and list it in the registry (built in:
/// `formats/mod.rs`; from outside the library: [`register`](super::register)).
///
/// **Ids.** Every entry [`parse`](TranscriptFormat::parse) returns needs an id that stays the
/// same when the same message is read again — the record, pins, `since` and undo name entries
/// by id. Use the format's own message ids where it has them; a format without ids derives
/// them from content with [`content_id`](super::content_id), as the chat APIs do (a position
/// would shift after every compaction and name another message).
pub trait TranscriptFormat: Send + Sync + 'static {
    /// The name `--out-format`, MCP's `format`, reports and errors use: lowercase, stable.
    fn name(&self) -> &'static str;

    /// Whether a document is of this format. `head` is its first non-blank line read as JSON
    /// (long strings shortened; `None` when that line is no JSON value on its own, as in a
    /// pretty-printed document); `text` is the whole document, for the formats that must look
    /// further. Detection tries the header formats first, registered ones next and the chat
    /// documents (any JSON array or `{messages}`) last.
    fn detect(&self, head: Option<&Value>, text: &str) -> bool;

    /// The entries of a non-empty `text` (a leading byte-order mark already removed). Errors
    /// name `source_name` and, where known, the line.
    fn parse(&self, text: &str, source_name: &str) -> Result<Transcript, TranscriptError>;

    /// The entries appended after those a record acknowledged, sent on their own: by default
    /// read as a whole document. A format whose files open with a header supplies one.
    fn parse_fragment(&self, text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
        self.parse(text, source_name)
    }

    /// How Cairn writes a transcript in this format; `None` (the default) for a log only its
    /// harness writes (Claude Code's, Codex's).
    fn writer(&self) -> Option<fn(&Transcript) -> String> {
        None
    }

    /// Whether its files carry Cairn's own turn numbers and checkpoint marks, kept as read
    /// (Cairn JSONL, so that it round-trips exactly); any other format's entries are numbered
    /// on reading.
    fn records_turns(&self) -> bool {
        false
    }
}

/// A transcript format, by handle: cheap to copy, equal by name.
#[derive(Clone, Copy)]
pub struct Format(pub(super) &'static dyn TranscriptFormat);

impl Format {
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// Cairn writes it (Claude Code's and Codex's logs only they write).
    pub fn writable(self) -> bool {
        self.0.writer().is_some()
    }

    /// `t` in this format, for the formats Cairn writes.
    pub fn write(self, t: &Transcript) -> Option<String> {
        self.0.writer().map(|write| write(t))
    }

    pub(super) fn implementation(self) -> &'static dyn TranscriptFormat {
        self.0
    }
}

impl PartialEq for Format {
    fn eq(&self, other: &Format) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Format {}

impl fmt::Debug for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Format({})", self.name())
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `head` when it is a JSON object: what the header formats read.
pub(super) fn object(head: Option<&Value>) -> Option<&serde_json::Map<String, Value>> {
    head.and_then(Value::as_object)
}
