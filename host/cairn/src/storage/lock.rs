//! One writer per conversation at a time, across processes: an advisory lock (`flock`) on
//! `lock` in the conversation's folder, held while a store opened to write lives. Readers
//! take no lock and never modify the record.

use std::fs::TryLockError;
use std::time::{Duration, Instant};

use cap_std::fs::{Dir, OpenOptions};

const LOCK: &str = "lock";
/// How long a writer waits for another before giving up with an error (a chain with slow
/// model steps can hold a conversation for minutes; a forgotten store would hold it forever).
const WAIT: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(10);

/// Holds the conversation's write lock; dropping it releases the lock.
#[derive(Debug)]
pub struct Writer {
    _file: std::fs::File,
}

impl Writer {
    /// Waits until no other writer holds the conversation, then holds it.
    pub fn acquire(dir: &Dir) -> std::io::Result<Self> {
        let file = dir.open_with(LOCK, OpenOptions::new().create(true).truncate(false).write(true))?.into_std();
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Writer { _file: file }),
                Err(TryLockError::WouldBlock) if started.elapsed() < WAIT => std::thread::sleep(POLL),
                Err(TryLockError::WouldBlock) => {
                    return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("another writer has held this conversation for {}s", WAIT.as_secs())))
                }
                Err(TryLockError::Error(e)) => return Err(e),
            }
        }
    }
}
