//! Cairn through its Python wheel (`cairn-compaction`, `host/python`), in an interpreter where it
//! is installed: warm compactions through `cairn.Host`, what a Python harness pays in-process.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use serde_json::Value;

const SCRIPT: &str = include_str!("python.py");

/// p50 of warm compactions of `file` by `python`'s `cairn` into the home `home`.
pub fn warm(python: &Path, file: &Path, iterations: usize, home: &Path) -> Result<f64> {
    let out = Command::new(python).arg("-c").arg(SCRIPT).arg(file).arg(iterations.to_string()).arg(home).output().with_context(|| format!("--python {}", python.display()))?;
    anyhow::ensure!(out.status.success(), "--python {}: {}", python.display(), String::from_utf8_lossy(&out.stderr).trim());
    let report: Value = serde_json::from_slice(&out.stdout).with_context(|| format!("the Python bench printed {}", String::from_utf8_lossy(&out.stdout)))?;
    report["p50_ms"].as_f64().with_context(|| format!("the Python bench printed no p50_ms: {report}"))
}
