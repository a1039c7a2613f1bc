//! The file primitives every part of storage uses: one appender for JSONL files, one reader
//! that tells complete lines from a torn tail, atomic replacement, symlink-refusing opens, and
//! private modes.

use std::io::{Read, Write};

use cap_std::fs::{Dir, DirBuilder, DirBuilderExt, OpenOptions, OpenOptionsExt};

/// Every file the record writes: the owner's alone. Conversations hold whatever the agent
/// read (keys, customer data), so no other local user may read them, whatever the umask.
pub const PRIVATE_FILE: u32 = 0o600;
/// Every folder the record creates, the home's own included.
pub const PRIVATE_DIR: u32 = 0o700;

/// Creates `path` below `dir` with its missing parents, each [`PRIVATE_DIR`].
pub fn create_dirs(dir: &Dir, path: &str) -> std::io::Result<()> {
    dir.create_dir_with(path, DirBuilder::new().recursive(true).mode(PRIVATE_DIR))
}

/// Options that create a missing file as [`PRIVATE_FILE`] (the umask can only take more away).
pub fn private() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.mode(PRIVATE_FILE);
    options
}

/// Appends one line (a newline is added) and syncs it to disk; a file created by this call
/// gets its directory entry synced too.
pub fn append_line(dir: &Dir, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    append_with(dir, name, |out| out.write_all(bytes)).map(drop)
}

/// [`append_line`] for a line `write` produces as it goes (a large event is never held whole
/// in memory). The newline comes last, so a reader sees the line only once it is complete;
/// if `write` fails, what it wrote is cut off again. Returns where the line lies in the file.
pub fn append_with(dir: &Dir, name: &str, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> std::io::Result<std::ops::Range<u64>> {
    let created = !dir.exists(name);
    let file = dir.open_with(name, private().create(true).append(true))?;
    let before = file.metadata()?.len();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, &file);
    let written = write(&mut out).and_then(|()| out.write_all(b"\n")).and_then(|()| out.flush());
    drop(out);
    if let Err(e) = written {
        // Best effort: a cut that fails leaves a torn line the next writer repairs.
        let _ = file.set_len(before);
        return Err(e);
    }
    let after = file.metadata()?.len();
    file.sync_data()?;
    if created {
        sync_dir(dir)?;
    }
    Ok(before..after)
}

/// The lines of an append-only file.
#[derive(Debug, Default)]
pub struct Lines {
    /// Complete lines (newline-terminated), numbered from 1, blank ones left out.
    pub complete: Vec<(usize, String)>,
    /// Bytes up to the end of the last complete line.
    pub complete_len: u64,
    /// The number of the first line not complete (the torn one, or the next to be written).
    pub next_line: usize,
    /// A last line without its newline: a write still in progress or torn by a crash.
    pub torn: Option<String>,
}

/// Reads an append-only file; a missing file has no lines.
pub fn read_lines(dir: &Dir, name: &str) -> std::io::Result<Lines> {
    match dir.open(name) {
        Ok(file) => read_lines_from(&file.into_std(), 0, 1),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Lines { next_line: 1, ..Lines::default() }),
        Err(e) => Err(e),
    }
}

/// The lines of `file` from byte `offset` (the end of a complete line), numbered from
/// `first_line`. A line that is not UTF-8 is an error naming it.
pub fn read_lines_from(file: &std::fs::File, offset: u64, first_line: usize) -> std::io::Result<Lines> {
    use std::io::{Seek, SeekFrom};
    let mut bytes = Vec::new();
    let mut file = file;
    file.seek(SeekFrom::Start(offset))?;
    file.read_to_end(&mut bytes)?;
    let mut lines = Lines { complete_len: offset, next_line: first_line, ..Lines::default() };
    for chunk in bytes.split_inclusive(|b| *b == b'\n') {
        let Some(line) = chunk.strip_suffix(b"\n") else {
            lines.torn = Some(String::from_utf8_lossy(chunk).into_owned());
            break;
        };
        let number = lines.next_line;
        lines.next_line += 1;
        lines.complete_len += chunk.len() as u64;
        let line = std::str::from_utf8(line).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("line {number} is not UTF-8 ({e})")))?;
        if !line.trim().is_empty() {
            lines.complete.push((number, line.to_string()));
        }
    }
    Ok(lines)
}

/// Replaces `name` atomically: a uniquely named temporary file in the same directory, synced,
/// then renamed over it (cap-tempfile), and the directory synced so the rename is durable.
pub fn write_atomically(dir: &Dir, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    replace(dir, name, bytes)?;
    sync_dir(dir)
}

/// [`write_atomically`] without the directory sync, for a caller writing several files into
/// one directory that syncs it once after the last.
pub fn replace(dir: &Dir, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    replace_with(dir, name, |file| file.write_all(bytes))
}

/// [`replace`] with the content written piece by piece by `write` (nothing held whole in memory).
pub fn replace_with(dir: &Dir, name: &str, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> std::io::Result<()> {
    let mut temp = cap_tempfile::TempFile::new(dir)?;
    // A temporary file is created as the umask allows; set, not masked, so exact.
    rustix::fs::fchmod(temp.as_file(), rustix::fs::Mode::from_raw_mode(PRIVATE_FILE))?;
    {
        let mut buffered = std::io::BufWriter::new(temp.as_file_mut());
        write(&mut buffered)?;
        buffered.flush()?;
    }
    temp.as_file_mut().sync_all()?;
    temp.replace(name)
}

/// Makes a directory's entries (a create or rename in it) durable.
pub fn sync_dir(dir: &Dir) -> std::io::Result<()> {
    dir.open(".")?.sync_all()
}

/// Opens a directory below `dir` that is not a symlink. cap-std already refuses any path that
/// would leave the home; this also keeps a planted link from aliasing another conversation.
pub fn open_real_dir(dir: &Dir, path: &str) -> std::io::Result<Dir> {
    if dir.symlink_metadata(path)?.file_type().is_symlink() {
        return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, format!("{path} is a symlink")));
    }
    dir.open_dir(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> (tempfile::TempDir, Dir) {
        let temp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(temp.path(), cap_std::ambient_authority()).unwrap();
        (temp, dir)
    }

    #[test]
    fn a_torn_tail_is_told_apart_from_complete_lines() {
        let (_t, dir) = dir();
        append_line(&dir, "f", b"one").unwrap();
        append_line(&dir, "f", b"two").unwrap();
        let mut file = dir.open_with("f", OpenOptions::new().append(true)).unwrap();
        file.write_all(b"thr").unwrap();
        let lines = read_lines(&dir, "f").unwrap();
        assert_eq!(lines.complete, vec![(1, "one".to_string()), (2, "two".to_string())]);
        assert_eq!(lines.complete_len, 8);
        assert_eq!(lines.torn.as_deref(), Some("thr"));
        assert!(read_lines(&dir, "missing").unwrap().complete.is_empty());
    }

    #[test]
    fn a_line_whose_writing_fails_is_cut_off_again() {
        let (_t, dir) = dir();
        append_line(&dir, "f", b"one").unwrap();
        let failed = append_with(&dir, "f", |out| {
            out.write_all(&[b'x'; 100_000])?;
            Err(std::io::Error::other("the event cannot be written"))
        });
        assert!(failed.is_err());
        append_with(&dir, "f", |out| out.write_all(b"two")).unwrap();
        let lines = read_lines(&dir, "f").unwrap();
        assert_eq!(lines.complete, vec![(1, "one".to_string()), (2, "two".to_string())]);
        assert!(lines.torn.is_none());
    }

    #[test]
    fn atomic_writes_replace_whole_files_and_leave_no_temporaries() {
        let (temp, dir) = dir();
        write_atomically(&dir, "state.json", b"first").unwrap();
        write_atomically(&dir, "state.json", b"second").unwrap();
        assert_eq!(std::fs::read(temp.path().join("state.json")).unwrap(), b"second");
        assert_eq!(std::fs::read_dir(temp.path()).unwrap().count(), 1);
    }
}
