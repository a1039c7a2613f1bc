use super::super::bindings::archive::{ArchiveError, Hits, Host, Page, Summary};
use crate::capabilities::ArchiveCapability;

impl Host for ArchiveCapability {
    fn read_summary(&mut self) -> wasmtime::Result<Result<Summary, ArchiveError>> {
        Ok(self.summary().map(Into::into).map_err(Into::into))
    }

    fn search(&mut self, query: String, offset: u32, limit: u32) -> wasmtime::Result<Result<Hits, ArchiveError>> {
        Ok(ArchiveCapability::search(self, &query, offset as usize, limit as usize).map(Into::into).map_err(Into::into))
    }

    fn page_entries(&mut self, archive_id: String, offset: u32, limit: u32, char_offset: u32) -> wasmtime::Result<Result<Page, ArchiveError>> {
        Ok(self.page(&archive_id, offset as usize, limit as usize, char_offset as usize).map(Into::into).map_err(Into::into))
    }

    fn put_artifact(&mut self, content: String) -> wasmtime::Result<Result<String, ArchiveError>> {
        Ok(ArchiveCapability::put_artifact(self, content).map_err(Into::into))
    }
}
