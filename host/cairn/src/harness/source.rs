//! Where a harness call's transcript comes from: the text the caller sent, or a file on the
//! host's disk, and whether this host reads files for its callers at all.

use std::path::PathBuf;

use super::error::{Error, Result};
use crate::transcript::formats::{self, Format};
use crate::transcript::Transcript;

/// A call's transcript: its text, or a file the host reads.
pub(super) enum Source {
    Text(String),
    File(PathBuf),
}

/// Whether a call may name a file on the host's disk instead of sending the text.
#[derive(Clone, Debug)]
pub(super) enum Files {
    Read,
    /// Refused, with the reason the caller is told (a remote client never makes a server read a file).
    Refused(String),
}

pub(super) const NO_TRANSCRIPT: &str = "no transcript: give its text as `transcript`, or (over stdio) its file as `path`";

impl Source {
    /// The source a call names: its `transcript` text or its `path`, not both (None: neither).
    pub(super) fn of(text: Option<String>, path: Option<String>, files: &Files) -> Result<Option<Source>> {
        if text.is_some() && path.is_some() {
            return Err(Error::InvalidRequest("give the transcript either as `transcript` (its text) or as `path` (its file), not both".into()));
        }
        if let (Some(_), Files::Refused(why)) = (&path, files) {
            return Err(Error::Forbidden(why.clone()));
        }
        match (text, path) {
            (_, Some(path)) => Ok(Some(Source::File(PathBuf::from(path)))),
            (Some(text), None) => Ok(Some(Source::Text(text))),
            (None, None) => Ok(None),
        }
    }

    /// As [`of`](Source::of), where a transcript is required.
    pub(super) fn required(text: Option<String>, path: Option<String>, files: &Files) -> Result<Source> {
        Source::of(text, path, files)?.ok_or_else(|| Error::InvalidRequest(NO_TRANSCRIPT.into()))
    }

    /// The text and the name errors give it.
    fn read(&self) -> Result<(std::borrow::Cow<'_, str>, String)> {
        match self {
            Source::Text(text) => Ok((text.as_str().into(), "transcript".into())),
            Source::File(path) => {
                let name = path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|e| {
                    let message = format!("reading the transcript file {name} (`path`): {e}");
                    if e.kind() == std::io::ErrorKind::NotFound {
                        Error::NotFound(message)
                    } else {
                        Error::Internal(message)
                    }
                })?;
                Ok((text.into(), name))
            }
        }
    }

    /// The whole transcript, its format detected.
    pub(super) fn parse(&self) -> Result<(Transcript, Format)> {
        let (text, name) = self.read()?;
        formats::parse(&text, &name).map_err(|e| Error::TranscriptInvalid(e.to_string()))
    }

    /// The entries appended since the acknowledged one (see `BoundaryRequest::since`).
    pub(super) fn parse_appended(&self, format: Option<&str>) -> Result<(Transcript, Format)> {
        let format = format.map(Format::named).transpose().map_err(|e| Error::InvalidRequest(e.to_string()))?;
        let (text, _) = self.read()?;
        formats::parse_appended(format, &text, "transcript").map_err(|e| Error::TranscriptInvalid(e.to_string()))
    }
}
