//! What an agent's `install` or `uninstall` did: a line per fact for a person, or one JSON
//! object for a script (`--json`), from the same record, so the two cannot disagree.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

#[derive(Serialize)]
pub struct SetupReport {
    agent: &'static str,
    verb: &'static str,
    /// Each file the verb looked at, with what happened to it.
    files: Vec<FileChange>,
    /// What else a person should know (the next step, the conversation's key).
    notes: Vec<String>,
    /// The compiled-code cache after an install: what was compiled ahead, or why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    cache: Option<String>,
}

#[derive(Serialize)]
struct FileChange {
    path: String,
    change: Change,
    /// The same fact in words.
    said: String,
}

#[derive(Serialize, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    Added,
    Updated,
    Removed,
    /// Already as the verb would leave it: nothing written.
    Unchanged,
    /// Not Cairn's, or not there: left as it is.
    LeftAlone,
}

impl SetupReport {
    pub fn new(agent: &'static str, verb: &'static str) -> Self {
        SetupReport { agent, verb, files: Vec::new(), notes: Vec::new(), cache: None }
    }

    pub fn file(&mut self, path: &Path, change: Change, said: impl Into<String>) {
        self.files.push(FileChange { path: path.display().to_string(), change, said: said.into() });
    }

    pub fn note(&mut self, said: impl Into<String>) {
        self.notes.push(said.into());
    }

    /// After an install: compiles the bundled plugins into the code cache, so the agent's
    /// first `cairn serve` and hooks load them in milliseconds instead of compiling them
    /// (seconds, while an agent such as Codex does not wait). Never fails the install: a
    /// problem is a warning on stderr.
    fn warm_cache(&mut self) {
        match crate::setup::compile_bundled_into_cache() {
            Ok(done) => self.cache = Some(done),
            Err(problem) => eprintln!("warning: {problem}; Cairn compiles them when it starts instead"),
        }
    }

    /// An install's end: the cache warmed, then the report printed.
    pub fn finish_install(mut self, json: bool) -> Result<()> {
        self.warm_cache();
        self.print(json)
    }

    pub fn print(&self, json: bool) -> Result<()> {
        if json {
            println!("{}", serde_json::to_string_pretty(self)?);
            return Ok(());
        }
        for line in self.files.iter().map(|f| &f.said).chain(&self.notes).chain(&self.cache) {
            println!("{line}");
        }
        Ok(())
    }
}
