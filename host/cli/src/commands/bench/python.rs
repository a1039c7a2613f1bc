//! Cairn through its Python wheel (`cairn-compaction`, `host/python`), in an interpreter where it
//! is installed: warm compactions through `cairn.Host`, what a Python harness pays in-process,
//! and LangChain's own `SummarizationMiddleware` on the same messages when LangChain is there.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use serde_json::Value;

const SCRIPT: &str = include_str!("python.py");

pub struct Figures {
    /// p50 of the session file's text compacted.
    pub text_ms: f64,
    /// p50 of the same session as OpenAI chat messages compacted.
    pub messages_ms: f64,
    /// p50 of LangChain's `SummarizationMiddleware` preparing its summary of those messages,
    /// or why it could not run.
    pub langchain_ms: Result<f64, String>,
}

/// Warm compactions of `file` (and of `messages`, the same session as OpenAI chat messages) by
/// `python`'s `cairn` into the home `home`.
pub fn warm(python: &Path, file: &Path, messages: &Path, iterations: usize, home: &Path) -> Result<Figures> {
    let out = Command::new(python).arg("-c").arg(SCRIPT).args([file, messages]).arg(iterations.to_string()).arg(home).output().with_context(|| format!("--python {}", python.display()))?;
    anyhow::ensure!(out.status.success(), "--python {}: {}", python.display(), String::from_utf8_lossy(&out.stderr).trim());
    let report: Value = serde_json::from_slice(&out.stdout).with_context(|| format!("the Python bench printed {}", String::from_utf8_lossy(&out.stdout)))?;
    let figure = |key: &str| report[key].as_f64().with_context(|| format!("the Python bench printed no {key}: {report}"));
    let langchain_ms = match report["langchain_p50_ms"].as_f64() {
        Some(ms) => Ok(ms),
        None => Err(report["langchain_unavailable"].as_str().unwrap_or("LangChain did not run").to_string()),
    };
    Ok(Figures { text_ms: figure("p50_ms")?, messages_ms: figure("messages_p50_ms")?, langchain_ms })
}
