//! `cairn bench --quick` on the recorded Pi sessions, as CI runs it: every figure measured, and
//! every figure with a baseline (Pi's own code in node, the native build of shake-elide, raw
//! tiktoken-rs) has its ratio. Raw tiktoken-rs is in the binary only with `--features
//! tiktoken-baseline`: without it (CI's build, as shipped) its two rows must say so and how to get
//! it; the counts themselves are checked against tiktoken-rs in host/cairn's tokenizer tests.
//! Warm compaction through `cairn serve` (MCP over stdio), through the Node addon (the package
//! in `host/node`, with the addon `.ci/run` builds) and through the Python wheel (`.ci/run`
//! builds it; installed into a virtual environment here) are rows of each session too, and so is
//! the wheel beside LangChain's own `SummarizationMiddleware` on the same chat messages. Each
//! session's timed figures stand beside its floor as well (the compaction at an incremental
//! boundary among them, which fails the bench unless that boundary compacts): reading, parsing and counting it once
//! and one synced write — and the per-turn replay beside its own, which syncs once per boundary.

use crate::support::{self, node_packages, python_wheel};

use std::process::Command;

use serde_json::Value;
use support::shared;

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm (Pi's baseline)")]
fn bench_prints_every_figure_beside_its_baseline() {
    let mut files: Vec<_> = std::fs::read_dir(shared("pi")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut bench = Command::new(env!("CARGO_BIN_EXE_cairn"));
    bench.args(["bench", "--quick", "--json"]).args(&files).env("CAIRN_LOG", "error");
    // The addon row, when the addon is built (under CI it must be: .ci/run builds it first).
    let addon = match node_packages::fresh_addon(&node_packages::root()) {
        Ok(_) => {
            bench.arg("--node-package").arg(node_packages::root().join("host/node"));
            true
        }
        Err(why) => {
            assert!(std::env::var_os("CI").is_none(), "CI builds the addon before the tests (.ci/run): {why}");
            eprintln!("the addon row is left out outside CI: {why}");
            false
        }
    };
    // The Python wheel's row, likewise (in a virtual environment holding the wheel).
    let venv = tempfile::tempdir().unwrap();
    let wheel = python_wheel::venv_with_wheel(venv.path()).inspect(|python| {
        bench.arg("--python").arg(python);
    });
    let out = bench.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let figures = |file: Option<&str>| rows.iter().filter(|r| r["file"].as_str() == file).map(|r| r["figure"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    for file in &files {
        let name = file.file_name().unwrap().to_str().unwrap();
        let per_session = figures(Some(name));
        for figure in [
            "the floor: read, parse, count once, one synced write",
            "the floor of a per-turn replay: the same, one synced append per boundary",
            "cold compaction",
            "warm compaction",
            "warm compaction at an incremental boundary",
            "per-turn replay",
            "peak memory",
            "shake-elide",
            "warm compaction through `cairn serve`",
            "warm compaction at an incremental boundary through `cairn serve`",
            "warm compaction through the Node addon",
            "warm compaction through the Python wheel",
            "the wheel on chat messages vs LangChain's SummarizationMiddleware",
        ] {
            assert!(per_session.iter().any(|f| f.starts_with(figure)), "{name}: no `{figure}` in {per_session:?}");
        }
    }
    let host = figures(None);
    for figure in ["start-up", "warm instantiation + call, p50", "warm instantiation + call, p99", "1 MiB transcript", "tokenizer throughput", "tokenizer exactness"] {
        assert!(host.iter().any(|f| f.starts_with(figure)), "no `{figure}` in {host:?}");
    }
    let tiktoken = ["tokenizer throughput", "tokenizer exactness (1 MiB session)"];
    for row in &rows {
        if row["unavailable"].is_null() {
            assert!(row["cairn"].as_f64().unwrap() > 0.0, "{row}");
        } else if row["figure"].as_str().unwrap().contains("Node addon") {
            assert!(!addon && row["unavailable"].as_str().unwrap().contains("--node-package"), "missing only without the package, saying how to get it: {row}");
        } else if row["figure"].as_str().unwrap().contains("Python wheel") || row["figure"].as_str().unwrap().contains("LangChain") {
            // LangChain is installed beside the wheel wherever the wheel is (.ci/run pins it).
            assert!(wheel.is_none() && row["unavailable"].as_str().unwrap().contains("--python"), "missing only without the wheel, saying how to get it: {row}");
        } else {
            assert!(!cfg!(feature = "tiktoken-baseline") && tiktoken.iter().any(|f| row["figure"] == *f), "only tiktoken-rs may be missing, and only without the feature: {row}");
            assert!(row["unavailable"].as_str().unwrap().contains("--features tiktoken-baseline"), "says how to get it: {row}");
            assert!(row["baseline"].is_null() && row["ratio"].is_null(), "{row}");
        }
        if !row["baseline"].is_null() {
            assert!(row["ratio"].as_f64().unwrap() > 0.0, "a baseline without its ratio: {row}");
        }
        // Every timed figure of a session stands beside that session's floor.
        let timed_session_figure = !row["file"].is_null() && row["unit"] == "ms" && !row["cairn"].is_null() && !row["figure"].as_str().unwrap().starts_with("the floor");
        assert_eq!(timed_session_figure, row["floor_ratio"].as_f64().is_some_and(|r| r > 0.0), "{row}");
    }
    let exact = rows.iter().find(|r| r["figure"] == tiktoken[1]).unwrap();
    if cfg!(feature = "tiktoken-baseline") {
        assert_eq!(exact["cairn"], 100.0, "Cairn's token counts are tiktoken-rs's: {exact}");
    } else {
        let throughput = rows.iter().find(|r| r["figure"] == tiktoken[0]).unwrap();
        assert!(throughput["cairn"].as_f64().unwrap() > 0.0 && exact["cairn"].is_null(), "Cairn's own throughput is measured all the same: {throughput}");
    }
}

/// `cairn bench --long --quick`: a recorded Pi session grown to 2 MB and 100 turns through
/// `cairn serve`, incremental against whole. Every boundary of the incremental replay must be
/// accepted (a `diverged` one fails the bench), and it must move about the session's bytes
/// once while the whole replay moves them at every turn.
#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn long_bench_replays_a_grown_session_incrementally_and_whole() {
    let file = shared("pi").join("pi-mono__large-session.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["bench", "--long", "--quick", "--json"]).arg(&file).env("CAIRN_LOG", "error").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let turns = report["turns"].as_u64().unwrap();
    assert!(turns >= 100 && report["session_mb"].as_f64().unwrap() >= 2.0, "grown to 2 MB and 100 turns: {report}");
    let at: Vec<u64> = report["at"].as_array().unwrap().iter().map(|a| a["turn"].as_u64().unwrap()).collect();
    assert_eq!(at, [10, 100, turns], "{report}");
    for a in report["at"].as_array().unwrap() {
        for mode in ["incremental", "whole"] {
            let (p50, p99) = (a[mode]["p50_ms"].as_f64().unwrap(), a[mode]["p99_ms"].as_f64().unwrap());
            assert!(p50 > 0.0 && p99 >= p50, "{mode} at turn {}: {a}", a["turn"]);
        }
    }
    let (incremental, whole) = (report["incremental_mb_sent"].as_f64().unwrap(), report["whole_mb_sent"].as_f64().unwrap());
    let per_byte = report["incremental_sent_per_session_byte"].as_f64().unwrap();
    assert!((1.0..3.0).contains(&per_byte), "the incremental replay sends the session about once: {per_byte}×");
    assert!(whole > 20.0 * incremental, "whole {whole} MB vs incremental {incremental} MB");
    for peak in ["incremental_peak_mib", "whole_peak_mib"] {
        assert!(report[peak].as_f64().unwrap() > 1.0, "{peak}: {report}");
    }
}
