//! Plugins written in Python and JavaScript, built with their real toolchains
//! (componentize-py, jco) by `cairn plugins build`, run through the host on the recorded
//! sessions in `../shared/transcripts`; and `cairn new` for both languages.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cairn::transcript::{formats, Part};
use serde_json::Value;
use support::shared;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn run(command: &mut Command) -> Output {
    let out = command.env("CAIRN_LOG", "error").output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(out.status.success(), "{command:?} failed:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    out
}

fn cairn(dir: &Path, args: &[&str]) -> String {
    String::from_utf8(run(Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).current_dir(dir)).stdout).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every recorded session Cairn reads: Pi and OpenAI chat.
fn sessions() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["pi", "openai-chat"].iter().flat_map(|dir| std::fs::read_dir(shared(dir)).unwrap().map(|e| e.unwrap().path())).collect();
    files.sort();
    files
}

/// Builds the repository plugin `plugins/<name>` into `out` with `cairn plugins build`.
fn build_plugin(name: &str, out: &Path) {
    let dir = repo().join("plugins").join(name);
    cairn(&dir, &["plugins", "build", ".", "--out", s(out)]);
    assert!(out.join(format!("{name}.wasm")).is_file() && out.join(format!("{name}.toml")).is_file());
}

/// observation-mask (Python): its own unit tests, then a chain of just this plugin on every
/// recorded session. The host accepts its outcome (no fallback to the last resort), the
/// context shrinks, only older non-error observations are masked, every masked one carries
/// its URI, and the archive returns each original exactly.
#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
#[cfg_attr(no_componentize_py, ignore = "needs componentize-py (pip install componentize-py==0.25.1; .ci/run installs it)")]
fn observation_mask_in_python_masks_real_sessions_recoverably() {
    let plugin = repo().join("plugins/observation-mask");
    run(Command::new("python3").args(["-m", "unittest", "-q"]).current_dir(&plugin).env("PYTHONPATH", repo().join("sdk/python")));
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    build_plugin("observation-mask", &plugins);
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[[chain]]\nplugin = \"observation-mask\"\ngrants = [\"log\", \"tokens\", \"archive:write\"]\ntimeout_ms = 60000\n[chain.config]\nkeep_last = 5\n").unwrap();
    for file in sessions() {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let home = dir.path().join(format!("home-{name}"));
        let out = dir.path().join(format!("{name}.out.jsonl"));
        let report: Value =
            serde_json::from_str(&cairn(dir.path(), &["compact", s(&file), "--policy", s(&policy), "--plugin-dir", s(&plugins), "--home", s(&home), "--out", s(&out), "--json"])).unwrap();
        assert_eq!(report["steps"][0]["outcome"], "ok", "{name}: {report:#}");
        assert!(report["committed_by"].as_str().unwrap().starts_with("observation-mask@"), "{name}: {report:#}");
        let (before, after) = (report["tokens_before"].as_u64().unwrap(), report["tokens_after"].as_u64().unwrap());
        assert!(after < before, "{name}: {before} -> {after}");

        let original = formats::parse(&std::fs::read_to_string(&file).unwrap(), &name).unwrap().0;
        let originals: std::collections::HashMap<&str, (&str, bool)> = original
            .entries
            .iter()
            .flat_map(|e| &e.parts)
            .filter_map(|p| match p {
                Part::ToolResult { call_id, content, is_error, .. } => Some((call_id.as_str(), (content.as_str(), *is_error))),
                _ => None,
            })
            .collect();
        let compacted = formats::parse(&std::fs::read_to_string(&out).unwrap(), "out").unwrap().0;
        let mut masked = 0;
        for part in compacted.entries.iter().flat_map(|e| &e.parts) {
            if let Part::ToolResult { call_id, content, elided: Some(uri), .. } = part {
                let (text, is_error) = originals[call_id.as_str()];
                assert!(!is_error, "{name}: an error result was masked ({call_id}) although keep_errors is on");
                assert!(content.contains(uri.as_str()), "{name}: the placeholder names its URI: {content}");
                assert_eq!(cairn(dir.path(), &["artifact", uri, "--home", s(&home)]), text, "{name}: {uri} is the original of {call_id}");
                masked += 1;
            }
        }
        assert!(masked > 0, "{name}: nothing masked");
        assert_eq!(masked, report["artifacts"].as_array().unwrap().len(), "{name}: one artifact per masked observation");
    }
}

/// `cairn new` in `lang` for every kind: the project's own `tests` pass, `cairn plugins build`
/// makes a component, and `cairn plugins check` passes it.
fn new_projects_test_build_and_check(lang: &str, tests: &[&[&str]]) {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["strategy", "trigger", "commit-policy"] {
        let name = format!("{lang}-{kind}");
        cairn(dir.path(), &["new", kind, &name, "--lang", lang]);
        let project = dir.path().join(&name);
        for command in tests {
            run(Command::new(command[0]).args(&command[1..]).current_dir(&project));
        }
        // The strategy reaches for what the sandbox does not grant when its config says 7 (one
        // build serves both the passing check and these cases).
        let reach = match (lang, kind) {
            ("python", "strategy") => Some(("app.py", "        config = parse_config(Config, request.config)\n", "        if config.max_chars == 7:\n            open(\"/etc/passwd\").read()\n")),
            // A trigger has no error channel: an uncaught exception traps the call.
            ("python", "trigger") => {
                Some(("app.py", "    requested = pending_request_decision(input)\n", "    if config.compact_at == 7:\n        raise ValueError(\"compact_at 7 is not a share\")\n"))
            }
            ("js", "strategy") => Some((
                "src/index.js",
                "    const config = parseConfig(request.config, { ...DEFAULTS });\n",
                "    if (config.operator_chars === 7) logInfo(`now: ${Date.now()}`);\n    if (config.operator_chars === 6) logInfo(`now: ${performance.now()}`);\n",
            )),
            _ => None,
        };
        // The line the reaching code lands on, 1-based.
        let mut reach_line = 0;
        if let Some((file, after, added)) = reach {
            let source = std::fs::read_to_string(project.join(file)).unwrap();
            assert!(source.contains(after), "{file} changed: {source}");
            reach_line = source.lines().position(|l| l == after.trim_end()).unwrap() + 2;
            std::fs::write(project.join(file), source.replacen(after, &format!("{after}{added}"), 1)).unwrap();
        }
        cairn(&project, &["plugins", "build"]);
        let checked = cairn(&project, &["plugins", "check", &format!("dist/{name}.wasm")]);
        assert!(checked.contains(&format!("exports the `{kind}` world")) && checked.contains("passed"), "{checked}");
        if lang == "js" && kind == "strategy" {
            // The JS SDK builds strategies for 0.1.0 on purpose: the check offers no rebuild.
            assert!(checked.contains("The JavaScript SDK builds strategies for @0.1.0 on purpose") && checked.contains("nothing to rebuild"), "{checked}");
            assert!(!checked.contains("rebuild with the current SDK"), "{checked}");
        }
        if let Some((file, ..)) = reach {
            let key = match (lang, kind) {
                ("js", _) => "operator_chars",
                (_, "trigger") => "compact_at",
                _ => "max_chars",
            };
            let out =
                Command::new(env!("CARGO_BIN_EXE_cairn")).args(["plugins", "check", &format!("dist/{name}.wasm"), "--config", &format!("{{\"{key}\": 7}}")]).current_dir(&project).output().unwrap();
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(!out.status.success(), "{file}: {said}");
            if lang == "js" {
                // `Date.now()` is an error naming the clock, not an opaque `unreachable` trap.
                assert!(said.contains("Date.now(): a Cairn plugin has no clock (the sandbox grants no WASI clock"), "{said}");
                // …at the line of the project's source, not of the bundle.
                assert!(said.contains(&format!("(at src/index.js:{reach_line})")), "line {reach_line}: {said}");
                assert!(!said.contains("unreachable"), "{said}");
                // A trap the SDK cannot turn into an error (QuickJS's read-only `performance.now`)
                // gets the host's word on the stubbed-out WASI.
                let out =
                    Command::new(env!("CARGO_BIN_EXE_cairn")).args(["plugins", "check", &format!("dist/{name}.wasm"), "--config", r#"{"operator_chars": 6}"#]).current_dir(&project).output().unwrap();
                let said = String::from_utf8_lossy(&out.stdout);
                assert!(
                    said.contains("trapped: wasm trap: wasm `unreachable` instruction executed (no WASI in a JavaScript plugin's sandbox: a JavaScript plugin traps this way when it reads the clock"),
                    "{said}"
                );
            } else if kind == "trigger" {
                // The trap carries the exception and the author's line, not only `unreachable`.
                assert!(said.contains("trapped: wasm trap: wasm `unreachable` instruction executed — it logged: Plugin raised ValueError: compact_at 7 is not a share | app.py:"), "{said}");
                assert!(said.contains(&format!("app.py:{} in decide", reach_line + 1)), "line {}: {said}", reach_line + 1);
            } else {
                // `open()` reads as the sandbox's missing filesystem, not a missing file.
                assert!(said.contains("/etc/passwd") && said.contains("(no filesystem in this sandbox: no directory is open to plugins"), "{said}");
            }
        }
        // The scaffold's manifest declares its config's schema, so a typo is refused when the
        // policy loads, naming the key and the keys the plugin knows.
        let typo = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["plugins", "check", &format!("dist/{name}.wasm"), "--config", r#"{"not_a_key": 1}"#]).current_dir(&project).output().unwrap();
        let said = String::from_utf8_lossy(&typo.stdout);
        assert!(!typo.status.success() && said.contains(&format!("plugin {name}@0.1.0: config does not match the plugin's config_schema: unknown key `not_a_key` (known: ")), "{kind}: {said}");
    }
}

/// In Python the project's tests run in plain CPython (the SDK's fake host), no Wasm needed.
#[test]
#[cfg_attr(no_componentize_py, ignore = "needs componentize-py (pip install componentize-py==0.25.1; .ci/run installs it)")]
fn cairn_new_python_projects_test_build_and_check() {
    new_projects_test_build_and_check("python", &[&["python3", "-m", "unittest", "-q"]]);
}

/// `npm ci` where a project's dependencies are not installed yet (a fresh clone).
fn npm_install(dir: &Path) {
    if !dir.join("node_modules").is_dir() {
        run(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(dir));
    }
}

/// `cairn simulate --json` of `file`: its events other than advice, as (kind, detail).
fn simulate(dir: &Path, file: &Path, window: &str, policy: &Path, plugins: &Path) -> Vec<(String, String)> {
    let out: Value = serde_json::from_str(&cairn(dir, &["simulate", s(file), "--window", window, "--policy", s(policy), "--plugin-dir", s(plugins), "--json"])).unwrap();
    out["events"].as_array().unwrap().iter().filter(|e| e["kind"] != "advice").map(|e| (e["kind"].as_str().unwrap().to_string(), e["detail"].as_str().unwrap_or_default().to_string())).collect()
}

/// cache-guard (JavaScript): its own tests, then the policy of its README replayed turn by
/// turn over every recorded session. It commits swaps that pay for their cache rewrite,
/// defers one that does not (saying so, with the break-even turn), and past its hard limit
/// commits whatever the cache costs.
#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn cache_guard_in_js_keeps_a_warm_cache_unless_a_swap_pays() {
    let plugin = repo().join("plugins/cache-guard");
    npm_install(&plugin);
    run(Command::new("npm").args(["test", "--silent"]).current_dir(&plugin));
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    build_plugin("cache-guard", &plugins);
    let example = std::fs::read_to_string(plugin.join("policy.example.toml")).unwrap();
    assert!(example.contains("hard_limit_tokens = 100000"), "the example policy changed: update this test");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, &example).unwrap();
    let low_limit = dir.path().join("low-limit.toml");
    std::fs::write(&low_limit, example.replace("hard_limit_tokens = 100000", "hard_limit_tokens = 50000")).unwrap();

    let mut deferred_for_cache = 0;
    for file in sessions() {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        // The OpenAI chat sessions hold 12k-21k tokens: a small window makes them compact.
        let window = if name.ends_with(".json") { "16000" } else { "128000" };
        let events = simulate(dir.path(), &file, window, &policy, &plugins);
        assert!(!events.is_empty(), "{name}: no maintenance at all");
        for (kind, detail) in &events {
            match kind.as_str() {
                "compact" => assert!(detail.starts_with("shake-elide@"), "{name}: {detail}"),
                "failed" => {
                    assert!(detail.contains("keeping the warm prompt cache is cheaper") && detail.contains("breaks even"), "{name}: {detail}");
                    deferred_for_cache += 1;
                }
                other => panic!("{name}: unexpected {other}: {detail}"),
            }
        }
        if name.ends_with(".jsonl") {
            assert!(events.iter().any(|(k, _)| k == "compact"), "{name}: a large swap pays for itself: {events:?}");
            let forced = simulate(dir.path(), &file, window, &low_limit, &plugins);
            assert!(forced.iter().all(|(k, _)| k == "compact"), "{name}: past the hard limit every swap commits: {forced:?}");
        }
    }
    assert!(deferred_for_cache > 0, "no swap was ever deferred for the cache");
}

/// In JavaScript: `npm install`, then `node --test`; the build is esbuild + jco.
#[test]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn cairn_new_js_projects_test_build_and_check() {
    new_projects_test_build_and_check("js", &[&["npm", "install", "--no-audit", "--no-fund"], &["npm", "test", "--silent"]]);
}

/// The Python and JavaScript SDKs' own unit tests (the shared rules, helpers, exports), which
/// need no Wasm toolchain.
#[test]
fn python_and_js_sdks_pass_their_own_tests() {
    run(Command::new("python3").args(["-m", "unittest", "discover", "-q", "-s", "tests"]).current_dir(repo().join("sdk/python")));
    if cfg!(no_npm) {
        eprintln!("skipping the JS SDK's tests: no npm here (CI has it)");
        return;
    }
    run(Command::new("node").args(["--test"]).arg("test/").current_dir(repo().join("sdk/js")));
}
