use wasmtime::component::Resource;

use super::super::bindings::conversation::{Host, HostHistory, SetAsideError};
use super::super::bindings::types::{Entry, EntryOutline};
use super::super::convert;
use crate::capabilities::conversation::LentHistory;
use crate::engine::CallState;

impl Host for CallState {}

/// The lent conversation lives in the call's resource table; the guest only ever borrows it.
impl HostHistory for CallState {
    fn len(&mut self, history: Resource<LentHistory>) -> wasmtime::Result<u32> {
        Ok(self.lent(&history)?.len())
    }

    fn entries(&mut self, history: Resource<LentHistory>, start: u32, end: u32) -> wasmtime::Result<Vec<Entry>> {
        Ok(self.lent(&history)?.entries(start, end).iter().map(convert::entry).collect())
    }

    fn outlines(&mut self, history: Resource<LentHistory>, start: u32, end: u32) -> wasmtime::Result<Vec<EntryOutline>> {
        Ok(self.lent(&history)?.entries(start, end).iter().map(convert::outline).collect())
    }

    fn part_text(&mut self, history: Resource<LentHistory>, index: u32, part: u32) -> wasmtime::Result<Option<String>> {
        Ok(self.lent(&history)?.part_text(index, part).map(str::to_string))
    }

    fn part_tokens(&mut self, history: Resource<LentHistory>, index: u32, part: u32) -> wasmtime::Result<Option<u32>> {
        Ok(self.lent(&history)?.part_tokens(index, part))
    }

    fn set_aside(&mut self, history: Resource<LentHistory>, index: u32, part: u32) -> wasmtime::Result<Result<String, SetAsideError>> {
        let (lent, archive) = self.lent_with_archive(&history)?;
        Ok(match lent.set_aside(index, part, archive) {
            Ok(Some(uri)) => Ok(uri),
            Ok(None) => Err(SetAsideError::NotFound(format!("entry {index} has no part {part}"))),
            Err(error) => Err(convert::set_aside_error(error)),
        })
    }

    fn drop(&mut self, history: Resource<LentHistory>) -> wasmtime::Result<()> {
        self.give_back(history)
    }
}
