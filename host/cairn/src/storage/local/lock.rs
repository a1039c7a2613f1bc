//! One writer per conversation at a time, across processes: an advisory lock (`flock`) on
//! `lock` in the conversation's folder, held while a store opened to write lives. Readers
//! take no lock and never modify the record.

use std::fs::TryLockError;
use std::time::{Duration, Instant};

use cap_std::fs::Dir;

use super::files;

use crate::storage::backend::{writer_timed_out, WRITER_WAIT as WAIT};

const POLL: Duration = Duration::from_millis(10);

/// Holds the conversation's write lock; dropping it releases the lock.
#[derive(Debug)]
pub struct Writer {
    _file: std::fs::File,
}

impl Writer {
    /// Waits until no other writer holds the lock file `name` in `dir`, then holds it.
    pub fn acquire(dir: &Dir, name: &str) -> std::io::Result<Self> {
        let file = dir.open_with(name, files::private().create(true).truncate(false).write(true))?.into_std();
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Writer { _file: file }),
                Err(TryLockError::WouldBlock) if started.elapsed() < WAIT => std::thread::sleep(POLL),
                Err(TryLockError::WouldBlock) => return Err(writer_timed_out()),
                Err(TryLockError::Error(e)) => return Err(e),
            }
        }
    }
}
