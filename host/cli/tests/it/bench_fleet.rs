//! `cairn bench --fleet --quick --json` against the test server: every configuration (the local
//! directory on one node, PostgreSQL on 1, 2 and 3) measured, no call failed, no node left behind.

use std::process::Command;

use serde_json::Value;

#[test]
fn bench_fleet_measures_every_configuration() {
    let Some(server) = cairn::storage::testing::server() else { return };
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["bench", "--fleet", "--quick", "--json", "--postgres", &server]).env("CAIRN_LOG", "error").output().unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let configurations = report["configurations"].as_array().unwrap();
    let measured: Vec<(&str, u64)> = configurations.iter().map(|c| (c["backend"].as_str().unwrap(), c["nodes"].as_u64().unwrap())).collect();
    assert_eq!(measured, [("local", 1), ("postgres", 1), ("postgres", 2), ("postgres", 3)], "{report}");
    for c in configurations {
        assert!(c["calls"].as_u64().unwrap() > 0, "{c}");
        assert_eq!(c["failed"], 0, "{c}");
        assert_eq!(c["committed"], c["calls"], "every call compacted: {c}");
        let (p50, p99) = (c["p50_ms"].as_f64().unwrap(), c["p99_ms"].as_f64().unwrap());
        assert!(p99 >= p50 && p50 > 0.0, "p50 {p50}, p99 {p99}: {c}");
        assert!(c["alone_p50_ms"].as_f64().unwrap() > 0.0 && c["floor_p50_ms"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["compactions_per_s"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["ratio_p50_to_local"].as_f64().unwrap() > 0.0, "{c}");
    }
    assert!(report["scaling"].as_str().unwrap().contains("nodes"), "{report}");

    // The nodes were killed and waited for: none of this run's is still serving.
    let ps = Command::new("ps").args(["-eo", "args="]).output().unwrap();
    let leftover: Vec<String> = String::from_utf8_lossy(&ps.stdout).lines().filter(|l| l.contains("serve --http") && l.contains("--conversation bench")).map(str::to_string).collect();
    assert!(leftover.is_empty(), "nodes left behind: {leftover:?}");
}
