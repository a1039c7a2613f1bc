//! The conversation a strategy is lent (contract 0.2.0): the host keeps the entries and the
//! strategy reads what it needs. [`Strategy::compact`](crate::Strategy::compact) gets every
//! entry in one batch (the simple path); a strategy that reads less implements
//! [`Strategy::compact_lent`](crate::Strategy::compact_lent) against [`Conversation`] and
//! answers with [`Replacement::Original`] for the entries it keeps unchanged.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::types::{CompactRequest, Entry, EntryOutline, Outcome, Part, PartOutline, Request, StrategyError, ToolResultOutline, WireOutcome};

/// What a strategy can read of the conversation it is compacting, by index.
pub trait Conversation {
    fn len(&self) -> u32;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Entries [start, end), whole (clamped).
    fn entries(&self, start: u32, end: u32) -> Vec<Entry>;
    /// Entries [start, end) without their text (clamped).
    fn outlines(&self, start: u32, end: u32) -> Vec<EntryOutline>;
    /// The text of one part (a tool call's: its arguments).
    fn part_text(&self, index: u32, part: u32) -> Option<String>;
    /// Its tokens, counted by the host without the text crossing.
    fn part_tokens(&self, index: u32, part: u32) -> Option<u32>;
    /// Stores that text with this compaction's archive (`archive:write`) and returns its URI.
    fn set_aside(&self, index: u32, part: u32) -> Result<String, StrategyError>;
}

/// The host's lent conversation.
impl Conversation for crate::strategy_bindings::cairn::compaction::conversation::History {
    fn len(&self) -> u32 {
        self.len()
    }
    fn entries(&self, start: u32, end: u32) -> Vec<Entry> {
        self.entries(start, end)
    }
    fn outlines(&self, start: u32, end: u32) -> Vec<EntryOutline> {
        self.outlines(start, end)
    }
    fn part_text(&self, index: u32, part: u32) -> Option<String> {
        self.part_text(index, part)
    }
    fn part_tokens(&self, index: u32, part: u32) -> Option<u32> {
        self.part_tokens(index, part)
    }
    fn set_aside(&self, index: u32, part: u32) -> Result<String, StrategyError> {
        use crate::host::conversation::SetAsideError;
        // As a refused or failed `put-artifact` is: refused is `unavailable`, the chain moves on.
        self.set_aside(index, part).map_err(|error| match error {
            SetAsideError::Denied(why) => StrategyError::Unavailable(format!("archive write: {why}")),
            SetAsideError::NotFound(why) | SetAsideError::TooLarge(why) => StrategyError::Failed(format!("set aside: {why}")),
        })
    }
}

/// A conversation held by the plugin itself: a native run (`cairn bench`) or a test. Counts
/// and artifacts go through the SDK's helpers, so natively through [`crate::native`].
impl Conversation for Vec<Entry> {
    fn len(&self) -> u32 {
        self.len() as u32
    }
    fn entries(&self, start: u32, end: u32) -> Vec<Entry> {
        self[clamp(self.len(), start, end)].to_vec()
    }
    fn outlines(&self, start: u32, end: u32) -> Vec<EntryOutline> {
        self[clamp(self.len(), start, end)].iter().map(outline).collect()
    }
    fn part_text(&self, index: u32, part: u32) -> Option<String> {
        self.get(index as usize)?.parts.get(part as usize).map(|p| crate::part_text(p).to_string())
    }
    fn part_tokens(&self, index: u32, part: u32) -> Option<u32> {
        self.get(index as usize)?.parts.get(part as usize).map(|p| crate::count_tokens(crate::part_text(p)))
    }
    fn set_aside(&self, index: u32, part: u32) -> Result<String, StrategyError> {
        let text = self.part_text(index, part).ok_or_else(|| StrategyError::Failed(format!("entry {index} has no part {part}")))?;
        crate::store_artifact(&text)
    }
}

/// Entries [start, end) read in one batch up front, their texts served from the copy; the rest
/// of the conversation, counts and set-asides still go to the host. For a strategy that reads
/// most texts of its window: one crossing instead of one per part.
pub struct Batched<'a> {
    lent: &'a dyn Conversation,
    start: u32,
    entries: Vec<Entry>,
}

impl<'a> Batched<'a> {
    pub fn new(lent: &'a dyn Conversation, start: u32, end: u32) -> Self {
        Batched { lent, start, entries: lent.entries(start, end) }
    }

    fn local(&self, index: u32) -> Option<&Entry> {
        self.entries.get(index.checked_sub(self.start)? as usize)
    }
}

impl Conversation for Batched<'_> {
    fn len(&self) -> u32 {
        self.lent.len()
    }
    fn entries(&self, start: u32, end: u32) -> Vec<Entry> {
        self.lent.entries(start, end)
    }
    fn outlines(&self, start: u32, end: u32) -> Vec<EntryOutline> {
        self.lent.outlines(start, end)
    }
    fn part_text(&self, index: u32, part: u32) -> Option<String> {
        match self.local(index) {
            Some(entry) => entry.parts.get(part as usize).map(|p| crate::part_text(p).to_string()),
            None => self.lent.part_text(index, part),
        }
    }
    fn part_tokens(&self, index: u32, part: u32) -> Option<u32> {
        self.lent.part_tokens(index, part)
    }
    fn set_aside(&self, index: u32, part: u32) -> Result<String, StrategyError> {
        self.lent.set_aside(index, part)
    }
}

fn clamp(len: usize, start: u32, end: u32) -> std::ops::Range<usize> {
    let end = (end as usize).min(len);
    (start as usize).min(end)..end
}

/// An entry's outline, as the host makes it.
pub fn outline(entry: &Entry) -> EntryOutline {
    let bytes = |text: &str| text.len() as u32;
    EntryOutline {
        id: entry.id.clone(),
        role: entry.role,
        origin: entry.origin,
        parts: entry
            .parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => PartOutline::Text(bytes(t)),
                Part::Thinking(t) => PartOutline::Thinking(bytes(t)),
                Part::ToolCall(c) => PartOutline::ToolCall(c.clone()),
                Part::ToolResult(r) => PartOutline::ToolResult(ToolResultOutline { call_id: r.call_id.clone(), bytes: bytes(&r.content), is_error: r.is_error, elided: r.elided.clone() }),
                Part::Image(reference) => PartOutline::Image(bytes(reference)),
                Part::Placeholder(p) => PartOutline::Placeholder(p.clone()),
            })
            .collect(),
        tokens: entry.tokens,
        turn: entry.turn,
        pinned: entry.pinned,
    }
}

/// The simple path: every entry in one batch, [`Strategy::compact`](crate::Strategy::compact),
/// then each replacement entry equal to the original of its id sent back as its index.
pub fn compact_with_every_entry(conversation: &dyn Conversation, request: Request, compact: impl FnOnce(CompactRequest) -> Result<Outcome, StrategyError>) -> Result<WireOutcome, StrategyError> {
    let entries = conversation.entries(0, conversation.len());
    // Fingerprints, not copies: the entries move into the plugin's request.
    let originals: HashMap<String, (u32, u64)> = entries.iter().enumerate().map(|(i, e)| (e.id.clone(), (i as u32, fingerprint(e)))).collect();
    let outcome = compact(CompactRequest::new(request, entries))?;
    Ok(outcome.into_wire(|entry| originals.get(&entry.id).filter(|(_, print)| *print == fingerprint(entry)).map(|(i, _)| *i)))
}

/// A hash of everything an entry holds (the generated types derive no `Hash`).
fn fingerprint(entry: &Entry) -> u64 {
    let mut h = DefaultHasher::new();
    (&entry.id, entry.role as u8, entry.origin as u8, entry.tokens, entry.turn, entry.pinned).hash(&mut h);
    for part in &entry.parts {
        match part {
            Part::Text(t) => (0u8, t).hash(&mut h),
            Part::Thinking(t) => (1u8, t).hash(&mut h),
            Part::ToolCall(c) => (2u8, &c.id, &c.name, &c.args).hash(&mut h),
            Part::ToolResult(r) => (3u8, &r.call_id, &r.content, r.is_error, &r.elided).hash(&mut h),
            Part::Image(r) => (4u8, r).hash(&mut h),
            Part::Placeholder(p) => (5u8, &p.text, &p.uri).hash(&mut h),
        }
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{EntryRange, Origin, Replacement, RequestKind, Role};

    fn text(id: &str, text: &str) -> Entry {
        Entry { id: id.into(), role: Role::Assistant, origin: Origin::Agent, parts: vec![Part::Text(text.into())], tokens: 1, turn: 1, pinned: false }
    }

    #[test]
    fn unchanged_entries_go_back_as_their_index_and_the_rest_whole() {
        let conversation = vec![text("a", "one"), text("b", "two"), text("c", "three")];
        let request = Request {
            purpose: RequestKind::Compact,
            archive_id: "a-0".into(),
            protected_head: 0,
            tail_start: 3,
            token_target: 0,
            preserve: None,
            resume: None,
            previous_checkpoint: None,
            previous_checkpoint_through: None,
            config: String::new(),
        };
        let wire = compact_with_every_entry(&conversation, request, |request| {
            let entries = &request.entries;
            assert_eq!(entries.len(), 3, "every entry, in one batch");
            let changed = Entry { tokens: 2, ..entries[1].clone() };
            let new = text("", "a summary");
            Ok(Outcome::new(EntryRange { first: "a".into(), last: "c".into() }, vec![entries[0].clone(), changed, new, entries[2].clone()]))
        })
        .unwrap();
        let shape: Vec<String> = wire
            .replacement
            .iter()
            .map(|r| match r {
                Replacement::Original(i) => format!("original {i}"),
                Replacement::Entry(e) => format!("entry {}", e.id),
            })
            .collect();
        assert_eq!(shape, ["original 0", "entry b", "entry ", "original 2"], "a changed count is a change too");
    }
}
