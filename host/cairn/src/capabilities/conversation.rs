//! `conversation` (contract 0.2.0): the conversation being compacted, lent to a strategy for
//! one call. The host keeps the entries; the strategy reads what it needs by index, and can
//! set a part's text aside in the archive without the text crossing into the component. Not a
//! grant of its own: a strategy is given its conversation; `set-aside` needs `archive:write`
//! (checked by [`ArchiveCapability::set_aside`]).

use std::ops::Range;

use super::{ArchiveCapability, ArchiveError};
use crate::tokenizer::Tokenizer;
use crate::transcript::{Entry, Part};

/// The entries of one strategy call, shared (each entry's parts are an `Arc`).
pub struct LentHistory {
    entries: Vec<Entry>,
    tokenizer: Tokenizer,
}

impl LentHistory {
    pub fn new(entries: &[Entry], tokenizer: Tokenizer) -> Self {
        LentHistory { entries: entries.to_vec(), tokenizer }
    }

    pub fn len(&self) -> u32 {
        u32::try_from(self.entries.len()).unwrap_or(u32::MAX)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries [start, end), clamped to the conversation.
    pub fn entries(&self, start: u32, end: u32) -> &[Entry] {
        &self.entries[self.clamp(start, end)]
    }

    pub fn entry(&self, index: u32) -> Option<&Entry> {
        self.entries.get(index as usize)
    }

    fn clamp(&self, start: u32, end: u32) -> Range<usize> {
        let end = (end as usize).min(self.entries.len());
        (start as usize).min(end)..end
    }

    fn part(&self, index: u32, part: u32) -> Option<&Part> {
        self.entry(index)?.parts.get(part as usize)
    }

    /// The text of part `part` of entry `index` (see [`Part::text`]).
    pub fn part_text(&self, index: u32, part: u32) -> Option<&str> {
        self.part(index, part).map(Part::text)
    }

    pub fn part_tokens(&self, index: u32, part: u32) -> Option<u32> {
        self.part_text(index, part).map(|text| self.tokenizer.count(text))
    }

    /// Stores that text with this call's artifacts, shared with the entry.
    pub fn set_aside(&self, index: u32, part: u32, archive: &mut ArchiveCapability) -> Result<Option<String>, ArchiveError> {
        let Some(entry) = self.entry(index).filter(|e| (part as usize) < e.parts.len()) else { return Ok(None) };
        archive.set_aside(&entry.parts, part as usize).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::archive::Originals;
    use crate::capabilities::{Capability, Gate, Grants};
    use crate::transcript::{Origin, Role};

    fn history() -> LentHistory {
        LentHistory::new(&[Entry::text("a", Role::User, Origin::Operator, "hello there"), Entry::text("b", Role::Assistant, Origin::Agent, "x".repeat(300))], Tokenizer::default())
    }

    #[test]
    fn reads_are_clamped_to_the_conversation_and_name_nothing_outside_it() {
        let history = history();
        assert_eq!(history.entries(1, 99).len(), 1);
        assert_eq!(history.entries(7, 3).len(), 0, "a start past the end is an empty range, not a panic");
        assert_eq!(history.part_text(0, 0), Some("hello there"));
        assert_eq!(history.part_text(0, 1), None);
        assert_eq!(history.part_text(2, 0), None);
        assert!(history.part_tokens(0, 0).unwrap() > 0);
    }

    #[test]
    fn setting_aside_needs_archive_write() {
        let history = history();
        let archive = |grants: &[Capability]| ArchiveCapability::new(Gate::new("p@1".into(), Grants::new(grants.iter().copied())), "a-0123456789abcdef".into(), 0, None, Originals::default());
        let mut denied = archive(&[Capability::ArchiveRead]);
        assert!(matches!(history.set_aside(1, 0, &mut denied), Err(ArchiveError::Denied(_))));
        let mut granted = archive(&[Capability::ArchiveWrite]);
        assert_eq!(history.set_aside(1, 0, &mut granted).unwrap().as_deref(), Some("artifact://a-0123456789abcdef/1"));
        assert_eq!(history.set_aside(1, 5, &mut granted).unwrap(), None, "no such part");
        assert_eq!(granted.into_pending()[0].as_str(), "x".repeat(300));
    }
}
