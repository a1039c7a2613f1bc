//! The plugin author's loop with the real binary: `cairn new` → the project's own tests →
//! `cairn plugins build` → `cairn plugins check`, and the check's diagnosis of each common
//! mistake (with its fix).

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn cairn_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).current_dir(dir).env("CAIRN_LOG", "error").output().expect("running cairn")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `cairn plugins check --json` on `wasm` with `manifest` beside it: (exit ok, report).
fn check(dir: &Path, name: &str, wasm: &[u8], manifest: &str) -> (bool, Value) {
    std::fs::write(dir.join(format!("{name}.wasm")), wasm).unwrap();
    std::fs::write(dir.join(format!("{name}.toml")), manifest).unwrap();
    let out = cairn_in(dir, &["plugins", "check", &format!("{name}.wasm"), "--json"]);
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    (out.status.success(), report)
}

/// The error findings' messages and fixes, joined.
fn errors(report: &Value) -> String {
    report["findings"].as_array().unwrap().iter().filter(|f| f["level"] != "ok").map(|f| format!("{}: {} | fix: {}", f["level"], f["message"], f["fix"])).collect::<Vec<_>>().join("\n")
}

fn bundled(name: &str) -> &'static cairn_bundle::BundledPlugin {
    cairn_bundle::BUNDLED.iter().chain(cairn_bundle::FIXTURES).find(|p| p.manifest.contains(&format!("name = \"{name}\""))).unwrap_or_else(|| panic!("no bundled {name}"))
}

#[test]
fn plugins_check_passes_a_good_plugin_and_runs_it_on_sample_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let shake = bundled("shake-elide");
    let (ok, report) = check(dir.path(), "shake-elide", shake.component, shake.manifest);
    assert!(ok, "{report:#}");
    assert_eq!(report["world"], "strategy");
    assert_eq!(report["contract"], "0.2.0");
    assert_eq!(errors(&report), "", "lent the conversation: nothing to warn about");
    assert_eq!(report["grants"], serde_json::json!(["log", "tokens", "archive:write"]));
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 3, "{report:#}");
    assert!(cases.iter().all(|c| c["passed"] == true), "{report:#}");
    assert_eq!(cases[0]["outcome"], "ok", "shake-elide shrinks the generated session: {report:#}");

    let commit = bundled("commit-turn-boundary");
    let (ok, report) = check(dir.path(), "commit-turn-boundary", commit.component, commit.manifest);
    assert!(ok, "{report:#}");
    let details: Vec<&str> = report["cases"].as_array().unwrap().iter().map(|c| c["detail"].as_str().unwrap()).collect();
    assert_eq!(details[0], "commit");
    assert_eq!(details[1], "defer: a tool call is still running");
}

/// A component built against contract 0.1.0 before 0.2.0 existed still passes, and the check
/// says which contract it speaks, that it keeps working, and which SDKs would build 0.2.0.
#[test]
fn plugins_check_says_which_contract_a_component_was_built_against() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cairn/tests/fixtures/contract-0.1.0");
    let wasm = std::fs::read(fixture.join("shake-elide-0-1.wasm")).unwrap();
    let manifest = std::fs::read_to_string(fixture.join("shake-elide-0-1.toml")).unwrap();
    let (ok, report) = check(dir.path(), "shake-elide-0-1", &wasm, &manifest);
    assert!(ok, "{report:#}");
    assert_eq!(report["contract"], "0.1.0");
    assert_eq!(report["world"], "strategy");
    let said = errors(&report);
    assert!(said.contains("built against contract cairn:compaction@0.1.0, which this host links") && said.contains("it keeps working"), "{report:#}");
    // The fix offered is optional and names the SDKs that build 0.2.0 (not the JavaScript one,
    // which builds 0.1.0 strategies on purpose): never "rebuild with the current SDK".
    assert!(said.contains("fix: \"optional:") && said.contains("the Rust and Python SDKs build @0.2.0 strategies") && said.contains("the JavaScript SDK builds @0.1.0 ones for now"), "{said}");
    assert!(!said.contains("rebuild with the current SDK"), "{said}");
    assert!(report["cases"].as_array().unwrap().iter().all(|c| c["passed"] == true), "{report:#}");
}

#[test]
fn plugins_check_names_each_common_mistake_and_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    let shake = bundled("shake-elide");

    // A core module where a component belongs.
    let (ok, report) = check(dir.path(), "core", b"\0asm\x01\0\0\0", shake.manifest);
    assert!(!ok);
    let found = errors(&report);
    assert!(found.contains("core Wasm module, not a component") && found.contains("cairn plugins build"), "{found}");

    // A component exporting nothing the host calls.
    let (ok, report) = check(dir.path(), "empty", b"\0asm\x0d\0\x01\0", shake.manifest);
    assert!(!ok);
    let found = errors(&report);
    assert!(found.contains("exports none of the functions the host calls") && found.contains("exports `compact(history, request)`"), "{found}");

    // The wrong world in the manifest.
    let (ok, report) = check(dir.path(), "wrong-world", shake.component, &shake.manifest.replace("kind = \"strategy\"", "kind = \"trigger\""));
    assert!(!ok);
    let found = errors(&report);
    assert!(found.contains("says kind = \\\"trigger\\\"") && found.contains("set kind = \\\"strategy\\\""), "{found}");

    // A manifest that disagrees with the imports: an import it does not declare (an error) and
    // a declaration nothing imports (a warning).
    let manifest = shake.manifest.lines().map(|l| if l.starts_with("capabilities") { "capabilities = [\"log\", \"archive\", \"model\"]" } else { l }).collect::<Vec<_>>().join("\n");
    let (ok, report) = check(dir.path(), "undeclared", shake.component, &manifest);
    assert!(!ok);
    let found = errors(&report);
    assert!(found.contains("imports `cairn:compaction/tokens@0.2.0` but the manifest does not declare") && found.contains("add \\\"tokens\\\" to `capabilities`"), "{found}");
    assert!(found.contains("declares `model` but the component never imports it"), "{found}");

    // Importing WASI: a warning naming what the host does with it; the probe then fails its runs.
    let probe = bundled("wasi-probe");
    let (ok, report) = check(dir.path(), "wasi-probe", probe.component, probe.manifest);
    assert!(!ok, "the probe reports failure on every run");
    let found = errors(&report);
    assert!(found.contains("WASI interfaces") && found.contains("wasm32-unknown-unknown"), "{found}");
    assert!(report["cases"].as_array().unwrap().iter().all(|c| c["passed"] == false), "{report:#}");

    // No manifest at all.
    std::fs::write(dir.path().join("alone.wasm"), shake.component).unwrap();
    let out = cairn_in(dir.path(), &["plugins", "check", "alone.wasm"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("no manifest found") && text(&out).contains("alone.toml"), "{}", text(&out));
}

/// `cairn new` for every kind in Rust: the project's own tests pass natively, `cairn plugins
/// build` makes a component, and `cairn plugins check` passes it.
#[test]
fn cairn_new_rust_projects_test_build_and_check() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["strategy", "trigger", "commit-policy"] {
        let name = format!("my-{kind}");
        let out = cairn_in(dir.path(), &["new", kind, &name, "--lang", "rust", "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        let created: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(created["build"], "cairn plugins build");
        let project = dir.path().join(&name);
        // One target dir for the three projects' native tests (the Wasm builds get their own).
        let test = Command::new(env!("CARGO")).args(["test", "--quiet"]).current_dir(&project).env("CARGO_TARGET_DIR", dir.path().join("native-target")).output().unwrap();
        assert!(test.status.success(), "{kind}: cargo test failed:\n{}", text(&test));
        let built = cairn_in(&project, &["plugins", "build", "--json"]);
        assert!(built.status.success(), "{kind}: {}", text(&built));
        let wasm = format!("dist/{name}.wasm");
        let checked = cairn_in(&project, &["plugins", "check", &wasm]);
        assert!(checked.status.success(), "{kind}: {}", text(&checked));
        assert!(text(&checked).contains(&format!("exports the `{kind}` world")), "{}", text(&checked));
        // The scaffold's manifest declares its config's schema: a typo is refused at load.
        let typo = cairn_in(&project, &["plugins", "check", &wasm, "--config", r#"{"not_a_key": 1}"#]);
        assert!(!typo.status.success(), "{kind}: {}", text(&typo));
        assert!(text(&typo).contains(&format!("plugin {name}@0.1.0: config does not match the plugin's config_schema: unknown key `not_a_key` (known: ")), "{kind}: {}", text(&typo));
    }
    // A second project of the same name is refused, not overwritten.
    let again = cairn_in(dir.path(), &["new", "trigger", "my-trigger", "--lang", "rust"]);
    assert!(!again.status.success() && text(&again).contains("already exists"), "{}", text(&again));
}
