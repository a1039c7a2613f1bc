//! `cairn bench --quick` on the recorded Pi sessions, as CI runs it: every figure measured, and
//! every figure with a baseline (Pi's own code in node, the native build of shake-elide, raw
//! tiktoken-rs) has its ratio.

use crate::support;

use std::process::Command;

use serde_json::Value;
use support::shared;

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm (Pi's baseline)")]
fn bench_prints_every_figure_beside_its_baseline() {
    let mut files: Vec<_> = std::fs::read_dir(shared("pi")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["bench", "--quick", "--json"]).args(&files).env("CAIRN_LOG", "error").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let figures = |file: Option<&str>| rows.iter().filter(|r| r["file"].as_str() == file).map(|r| r["figure"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    for file in &files {
        let name = file.file_name().unwrap().to_str().unwrap();
        let per_session = figures(Some(name));
        for figure in ["cold compaction", "warm compaction", "per-turn replay", "peak memory", "shake-elide"] {
            assert!(per_session.iter().any(|f| f.starts_with(figure)), "{name}: no `{figure}` in {per_session:?}");
        }
    }
    let host = figures(None);
    for figure in ["start-up", "warm instantiation + call, p50", "warm instantiation + call, p99", "1 MiB transcript", "tokenizer throughput", "tokenizer exactness"] {
        assert!(host.iter().any(|f| f.starts_with(figure)), "no `{figure}` in {host:?}");
    }
    for row in &rows {
        assert!(row["cairn"].as_f64().unwrap() > 0.0, "{row}");
        if !row["baseline"].is_null() {
            assert!(row["ratio"].as_f64().unwrap() > 0.0, "a baseline without its ratio: {row}");
        }
    }
    let exact = rows.iter().find(|r| r["figure"] == "tokenizer exactness (1 MiB session)").unwrap();
    assert_eq!(exact["cairn"], 100.0, "Cairn's token counts are tiktoken-rs's: {exact}");
}
