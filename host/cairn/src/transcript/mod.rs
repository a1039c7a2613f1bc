//! The conversation as Cairn sees it: plain domain types, independent of any
//! file format (see `formats/`) and of the WIT bindings (see `wit_edge`).

pub mod formats;
pub mod sample;
mod usage;

pub use usage::Usage;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Who speaks in an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// Where an entry came from; decides what compaction may treat as
/// operator intent (verbatim) versus agent chatter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    Operator,
    Agent,
    Tool,
    Harness,
    Summary,
}

/// One piece of an entry's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Part {
    Text {
        text: String,
    },
    Thinking {
        text: String,
    },
    /// `args` is the JSON text of the arguments, kept as written.
    ToolCall {
        id: String,
        name: String,
        args: String,
    },
    ToolResult {
        call_id: String,
        content: String,
        is_error: bool,
        /// Set when compaction set the original content aside: its `artifact://` URI
        /// (`content` is then a short placeholder).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        elided: Option<String>,
    },
    Image {
        reference: String,
    },
    /// Content set aside by compaction; `uri` recovers it (`artifact://…`).
    Placeholder {
        text: String,
        uri: Option<String>,
    },
}

/// An entry's parts, shared by every copy of the entry: the record's snapshot, the chain's
/// working context and a compaction's kept entries hold the same text, not copies of it
/// (a 30 MB session is held once). Reading goes through `Deref`; changing one copy's parts
/// (`DerefMut`) copies that entry's parts first, and only those. Serialized as the list
/// itself, so the record and every format read and write it as they did a `Vec<Part>`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Parts(Arc<Vec<Part>>);

impl Parts {
    /// Whether both share one list (a copy of the same entry, not merely equal text).
    pub fn shares(&self, other: &Parts) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for Parts {
    type Target = Vec<Part>;
    fn deref(&self) -> &Vec<Part> {
        &self.0
    }
}

impl std::ops::DerefMut for Parts {
    fn deref_mut(&mut self) -> &mut Vec<Part> {
        Arc::make_mut(&mut self.0)
    }
}

impl From<Vec<Part>> for Parts {
    fn from(parts: Vec<Part>) -> Self {
        Parts(Arc::new(parts))
    }
}

impl FromIterator<Part> for Parts {
    fn from_iter<I: IntoIterator<Item = Part>>(iter: I) -> Self {
        Parts(Arc::new(iter.into_iter().collect()))
    }
}

impl<'a> IntoIterator for &'a Parts {
    type Item = &'a Part;
    type IntoIter = std::slice::Iter<'a, Part>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a mut Parts {
    type Item = &'a mut Part;
    type IntoIter = std::slice::IterMut<'a, Part>;
    fn into_iter(self) -> Self::IntoIter {
        Arc::make_mut(&mut self.0).iter_mut()
    }
}

impl PartialEq<Vec<Part>> for Parts {
    fn eq(&self, other: &Vec<Part>) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<[Part]> for Parts {
    fn eq(&self, other: &[Part]) -> bool {
        self.0.as_slice() == other
    }
}

impl<const N: usize> PartialEq<[Part; N]> for Parts {
    fn eq(&self, other: &[Part; N]) -> bool {
        self.0.as_slice() == other
    }
}

impl std::fmt::Debug for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for Parts {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Parts {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Part>::deserialize(deserializer).map(Parts::from)
    }
}

/// Text a compaction sets aside (an artifact), held once: a part's text set aside whole (an
/// elided or clipped tool output) is the entry's own, shared with it as its `Parts` are; any
/// other text is the artifact's own.
#[derive(Clone, PartialEq, Eq)]
pub struct Artifact(ArtifactText);

#[derive(Clone, PartialEq, Eq)]
enum ArtifactText {
    Own(String),
    /// The text of part `index` of `parts` (see [`Part::text`]).
    Shared {
        parts: Parts,
        index: usize,
    },
}

impl Artifact {
    /// The text of part `index` of `parts`, shared; `None` when there is no such part.
    pub fn shared(parts: &Parts, index: usize) -> Option<Self> {
        parts.get(index).map(|_| Artifact(ArtifactText::Shared { parts: parts.clone(), index }))
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            ArtifactText::Own(text) => text,
            ArtifactText::Shared { parts, index } => parts[*index].text(),
        }
    }
}

impl std::ops::Deref for Artifact {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<String> for Artifact {
    fn from(text: String) -> Self {
        Artifact(ArtifactText::Own(text))
    }
}

impl From<&str> for Artifact {
    fn from(text: &str) -> Self {
        Artifact(ArtifactText::Own(text.to_string()))
    }
}

impl PartialEq<String> for Artifact {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl std::fmt::Debug for Artifact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

impl Part {
    /// The part's text: what a strategy sets aside when it sets the part aside whole.
    pub fn text(&self) -> &str {
        match self {
            Part::Text { text } | Part::Thinking { text } | Part::Placeholder { text, .. } => text,
            Part::ToolCall { args, .. } => args,
            Part::ToolResult { content, .. } => content,
            Part::Image { reference } => reference,
        }
    }
}

/// One message or event of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Stable id: from the source format where it has one, else derived
    /// from the position in the source file (`e<index>`).
    pub id: String,
    pub role: Role,
    pub origin: Origin,
    pub parts: Parts,
    /// Tokens by the host tokenizer; filled in by `Transcript::count_tokens`.
    #[serde(default)]
    pub tokens: u32,
    /// Index of the user turn this entry belongs to (0 before the first user message).
    #[serde(default)]
    pub turn: u32,
    #[serde(default)]
    pub pinned: bool,
    /// The provider's response this entry came from, where the format records it. One
    /// response may span several entries; a compaction never splits one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// The context size the provider billed for the call that produced this entry (input,
    /// cached and output tokens), where the format records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_tokens: Option<u64>,
}

/// A whole conversation in the order the model sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transcript {
    pub entries: Vec<Entry>,
    /// Line and item kinds the reader met but does not know.
    pub unrecognized: Unrecognized,
}

/// Kinds of lines or items a reader does not know, counted by kind. Agents add kinds between
/// releases, so an unknown kind is never fatal: one that carries nothing for the model is
/// `skipped`; one that carries a message is `kept` as an opaque text entry, so no
/// conversation text is lost without a word.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Unrecognized {
    pub skipped: std::collections::BTreeMap<String, u32>,
    pub kept: std::collections::BTreeMap<String, u32>,
}

impl Unrecognized {
    pub fn is_empty(&self) -> bool {
        self.skipped.is_empty() && self.kept.is_empty()
    }

    pub fn skip(&mut self, kind: &str) {
        *self.skipped.entry(kind.to_string()).or_default() += 1;
    }

    pub fn keep(&mut self, kind: &str) {
        *self.kept.entry(kind.to_string()).or_default() += 1;
    }
}

impl std::fmt::Display for Unrecognized {
    /// `3 skipped (a ×2, b), 1 kept as text (c)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |kinds: &std::collections::BTreeMap<String, u32>| kinds.iter().map(|(k, n)| if *n > 1 { format!("{k} ×{n}") } else { k.clone() }).collect::<Vec<_>>().join(", ");
        let total = |kinds: &std::collections::BTreeMap<String, u32>| kinds.values().sum::<u32>();
        let mut parts = Vec::new();
        if !self.skipped.is_empty() {
            parts.push(format!("{} skipped ({})", total(&self.skipped), list(&self.skipped)));
        }
        if !self.kept.is_empty() {
            parts.push(format!("{} kept as text ({})", total(&self.kept), list(&self.kept)));
        }
        f.write_str(&parts.join(", "))
    }
}

/// How the instruction blocks agents inject as user messages begin (Codex's AGENTS.md, user
/// and skills instructions; Gemini CLI's session context): rules for the model, like the
/// system prompt, wherever they sit.
pub const INSTRUCTION_BLOCKS: &[&str] = &["<user_instructions>", "# AGENTS.md instructions", "<INSTRUCTIONS>", "<skills_instructions>", "<developer_instructions>", "<session_context>"];

impl Entry {
    /// Instructions, not history: a system or developer entry, or an instruction block a harness
    /// injected. Compaction keeps them verbatim wherever they sit (see `chain::invariants`).
    pub fn is_instructions(&self) -> bool {
        self.role == Role::System || self.origin == Origin::Harness && matches!(self.parts.first(), Some(Part::Text { text }) if INSTRUCTION_BLOCKS.iter().any(|b| text.trim_start().starts_with(b)))
    }

    pub fn text(id: impl Into<String>, role: Role, origin: Origin, text: impl Into<String>) -> Self {
        Entry { id: id.into(), role, origin, parts: vec![Part::Text { text: text.into() }].into(), tokens: 0, turn: 0, pinned: false, response: None, reported_tokens: None }
    }

    /// Ids of the tool calls this entry makes.
    pub fn tool_call_ids(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
    }

    /// Ids of the tool calls this entry answers.
    pub fn tool_result_ids(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
    }

    /// All the text the model would read in this entry, for token counting (the rule
    /// plugins share, from `cairn-rules`).
    pub fn model_text(&self) -> String {
        cairn_rules::entry_text(self)
    }

    /// The recovery URIs of content compaction set aside in this entry.
    pub fn elided_uris(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolResult { elided: Some(uri), .. } | Part::Placeholder { uri: Some(uri), .. } => Some(uri.as_str()),
            _ => None,
        })
    }
}

impl cairn_rules::RuleEntry for Entry {
    fn parts(&self) -> impl Iterator<Item = cairn_rules::PartRef<'_>> {
        use cairn_rules::PartRef;
        self.parts.iter().map(|p| match p {
            Part::Text { text } => PartRef::Text(text),
            Part::Thinking { text } => PartRef::Thinking(text),
            Part::ToolCall { id, name, args } => PartRef::ToolCall { id, name, args },
            Part::ToolResult { call_id, content, .. } => PartRef::ToolResult { call_id, content },
            Part::Image { reference } => PartRef::Image(reference),
            Part::Placeholder { text, .. } => PartRef::Placeholder(text),
        })
    }
}

impl Transcript {
    pub fn new(entries: Vec<Entry>) -> Self {
        Transcript { entries, unrecognized: Unrecognized::default() }
    }

    /// Marks the checkpoints Cairn wrote, handed back in a format that cannot say so (a user
    /// message of OpenAI chat, Anthropic, Pi, …), as summaries: they are never the operator's
    /// words, and the next checkpoint merges them.
    pub fn mark_own_checkpoints(&mut self) {
        for entry in &mut self.entries {
            let own = matches!(entry.parts.first(), Some(Part::Text { text }) if cairn_rules::intent::is_checkpoint_text(text));
            if own && entry.role == Role::User && entry.origin == Origin::Operator {
                entry.origin = Origin::Summary;
            }
        }
    }

    /// Marks an operator message that is a slash command (`/mode`, `/compact keep the port`)
    /// as the harness's: a command to the agent's interface, never the operator's intent for
    /// the task (a checkpoint whose root objective reads "/mode" has lost the task).
    pub fn mark_slash_commands(&mut self) {
        for entry in &mut self.entries {
            let command = entry.parts.len() == 1 && matches!(entry.parts.first(), Some(Part::Text { text }) if is_slash_command(text));
            if command && entry.role == Role::User && entry.origin == Origin::Operator {
                entry.origin = Origin::Harness;
            }
        }
    }

    /// Recomputes `turn` from the entries: a new turn starts at each
    /// operator message.
    pub fn number_turns(&mut self) {
        let mut turn = 0;
        for entry in &mut self.entries {
            if entry.role == Role::User && entry.origin == Origin::Operator {
                turn += 1;
            }
            entry.turn = turn;
        }
    }

    pub fn total_tokens(&self) -> u64 {
        self.entries.iter().map(|e| e.tokens as u64).sum()
    }
}

/// The provider's last billed context size and how many entries came after it: what Pi and
/// Claude Code trigger on. `None` when the format records no usage.
pub fn reported_usage(entries: &[Entry]) -> Option<(u64, usize)> {
    let (at, tokens) = entries.iter().enumerate().rev().find_map(|(i, e)| e.reported_tokens.filter(|&t| t > 0).map(|t| (i, t)))?;
    Some((tokens, entries.len() - 1 - at))
}

/// Whether an operator's message is a slash command: one line opening with `/name` (letters,
/// digits, `-`, `_`, `:`), alone or followed by its arguments. A path is not one (`/etc/hosts`,
/// nor `/tmp is full`: the top-level folders of a Unix system are never taken for a command).
pub fn is_slash_command(text: &str) -> bool {
    const FOLDERS: &[&str] = &["bin", "boot", "dev", "etc", "home", "lib", "mnt", "opt", "proc", "root", "run", "srv", "sys", "tmp", "usr", "var", "Users", "Volumes"];
    let text = text.trim();
    let Some(rest) = text.strip_prefix('/') else { return false };
    if text.contains('\n') {
        return false;
    }
    let name = &rest[..rest.find(char::is_whitespace).unwrap_or(rest.len())];
    name.starts_with(|c: char| c.is_ascii_alphabetic()) && name.len() <= 40 && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':')) && !FOLDERS.contains(&name)
}
