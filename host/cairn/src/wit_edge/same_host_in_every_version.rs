//! The `Host` impls of the imports whose WIT is the same in every contract version (`log`,
//! `tokens`, `archive`), written once and expanded in each version's `host` module against that
//! version's generated bindings (`super::bindings`, `super::convert` there). A capability whose
//! interface changes between versions keeps a file per version (`model`, `conversation`).

macro_rules! same_host_in_every_version {
    () => {
        impl super::bindings::log::Host for crate::capabilities::LogCapability {
            fn log(&mut self, level: super::bindings::log::Level, message: String) -> wasmtime::Result<()> {
                crate::capabilities::LogCapability::log(self, super::convert::level(level), &message);
                Ok(())
            }
        }

        impl super::bindings::tokens::Host for crate::capabilities::TokensCapability {
            /// `count` has no error channel: a refusal, an oversized input or the deadline ends the
            /// call (as `denied`, `invalid`… or `timeout`), never a made-up count.
            fn count(&mut self, text: String) -> wasmtime::Result<u32> {
                crate::capabilities::TokensCapability::count(self, &text).map_err(|e| match e {
                    crate::capabilities::CountError::Denied(refusal) => wasmtime::Error::new(refusal),
                    other => wasmtime::Error::new(other),
                })
            }
        }

        impl super::bindings::archive::Host for crate::capabilities::ArchiveCapability {
            fn read_summary(&mut self) -> wasmtime::Result<Result<super::bindings::archive::Summary, super::bindings::archive::ArchiveError>> {
                Ok(self.summary().map(Into::into).map_err(Into::into))
            }

            fn search(&mut self, query: String, offset: u32, limit: u32) -> wasmtime::Result<Result<super::bindings::archive::Hits, super::bindings::archive::ArchiveError>> {
                Ok(crate::capabilities::ArchiveCapability::search(self, &query, offset as usize, limit as usize).map(Into::into).map_err(Into::into))
            }

            fn page_entries(
                &mut self,
                archive_id: String,
                offset: u32,
                limit: u32,
                char_offset: u32,
            ) -> wasmtime::Result<Result<super::bindings::archive::Page, super::bindings::archive::ArchiveError>> {
                Ok(self.page(&archive_id, offset as usize, limit as usize, char_offset as usize).map(Into::into).map_err(Into::into))
            }

            fn put_artifact(&mut self, content: String) -> wasmtime::Result<Result<String, super::bindings::archive::ArchiveError>> {
                Ok(crate::capabilities::ArchiveCapability::put_artifact(self, content).map_err(Into::into))
            }
        }
    };
}

pub(crate) use same_host_in_every_version;
