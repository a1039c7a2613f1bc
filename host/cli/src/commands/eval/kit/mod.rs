//! `cairn eval --kit`: `compaction-conformance-kit`, a benchmark nobody here wrote (PyPI, pinned
//! in `requirements.txt`), run against this very binary's `cairn compact` by the adapter beside
//! this file (`cairn_kit.py`, embedded): the kit plants typed canaries, Cairn compacts five
//! rounds with its own output fed back, and the kit says what survived — at no budget and at
//! 10/20/30 % of the session — beside the kit's own compactors.

use std::process::Command;

use anyhow::{bail, Context, Result};

const ADAPTER: &str = include_str!("cairn_kit.py");
/// The kit's pinned requirement, as `pip install` takes it.
pub const REQUIREMENT: &str = include_str!("requirements.txt");

/// The kit's results for this binary (the adapter's JSON), with `missed`: the goals not met.
pub fn run() -> Result<serde_json::Value> {
    let requirement = REQUIREMENT.trim();
    let scratch = tempfile::Builder::new().prefix("cairn-kit-").tempdir()?;
    let adapter = scratch.path().join("cairn_kit.py");
    std::fs::write(&adapter, ADAPTER)?;
    let binary = crate::setup::cairn_exe().context("finding this cairn binary")?;
    let output = Command::new("python3").arg(&adapter).arg("--cairn").arg(&binary).arg("--json").output().with_context(|| format!("--kit runs Python 3 (python3 on PATH) with {requirement}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains("No module named 'compaction_kit'") {
            bail!("--kit needs the kit: python3 -m pip install {requirement}");
        }
        bail!("the conformance kit failed ({}): {}", output.status, stderr.trim());
    }
    serde_json::from_slice(&output.stdout).context("reading the kit adapter's JSON")
}

/// Cairn's rows of the kit's results, for the terminal.
pub fn print(results: &serde_json::Value) {
    let kept = |row: &serde_json::Value| row["kept"].as_array().map(|k| k.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" → ")).unwrap_or_default();
    println!("\ncompaction-conformance-kit ({}), Cairn's own output fed back each round:", REQUIREMENT.trim());
    println!("  seeded session, canaries kept (of 20) round 1 → 5: {}", kept(&results["seeded"]["cairn"]));
    for (budget, rows) in results["seeded_at_budget"].as_object().into_iter().flatten() {
        let row = &rows["cairn"];
        println!("  seeded session at {budget}: {} ({})", kept(row), if row["within_budget"].as_bool() == Some(true) { "fits" } else { "OVER the budget" });
    }
    for entry in results["benchmark"]["entries"].as_array().into_iter().flatten().filter(|e| e["compactor"] == "cairn") {
        let sup = &entry["randomized"]["supersession"];
        println!(
            "  benchmark at {:.0}%: rank {}, survival {:.0}%, superseded values resolved {}/{}, {}",
            entry["budget_fraction"].as_f64().unwrap_or_default() * 100.0,
            entry["rank"],
            entry["randomized"]["overall_final_survival"].as_f64().unwrap_or_default() * 100.0,
            sup["resolved"],
            sup["n"],
            if entry["budget_compliant"].as_bool() == Some(true) { "fits" } else { "OVER the budget" }
        );
    }
    let generated = &results["generated"]["cairn"];
    println!("  generated corpus: {} → {} of {} canaries (round 1 → 5)", generated["round1"], generated["round5"], generated["canaries"]);
    for missed in results["missed"].as_array().into_iter().flatten() {
        println!("  missed: {}", missed.as_str().unwrap_or_default());
    }
}
