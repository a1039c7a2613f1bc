//! `cairn codex install` / `uninstall`: Cairn's block in Codex's config.toml, added after the
//! user's text and removed byte for byte; files it cannot be appended to are refused untouched.
//! (With the real Codex binary: `agents::codex`.)

use std::path::Path;
use std::process::{Command, Output};

/// A config as a user writes it: comments, a table of their own, hooks of their own on both
/// events Cairn uses.
const USER_CONFIG: &str = r#"# Codex, my way.
model = "gpt-5.5"   # the default
approval_policy = "on-request"

[mcp_servers.docs]
command = "docs-mcp"
args = ["--stdio"]

# Lint before every compaction.
[[hooks.PreCompact]]
[[hooks.PreCompact.hooks]]
type = "command"
command = "make lint"

[[hooks.SessionStart]]
matcher = "startup"
[[hooks.SessionStart.hooks]]
type = "command"
command = "bd prime"
"#;

fn cairn(codex_home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn")).args(["codex"]).args(args).env("CODEX_HOME", codex_home).env("CAIRN_LOG", "error").output().expect("running cairn")
}

fn ok(codex_home: &Path, args: &[&str]) -> String {
    let out = cairn(codex_home, args);
    assert!(out.status.success(), "cairn codex {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn config(codex_home: &Path) -> Option<String> {
    std::fs::read_to_string(codex_home.join("config.toml")).ok()
}

/// Installs, checks the result parses with the user's entries and Cairn's, uninstalls, and
/// checks the file is back byte for byte.
fn round_trip(user: &str) {
    let dir = tempfile::tempdir().unwrap();
    let codex_home = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(codex_home.join("config.toml"), user).unwrap();
    ok(&codex_home, &["install", "--home", "/srv/cairn"]);
    let installed = config(&codex_home).unwrap();
    assert!(installed.starts_with(user), "the user's text comes first, unchanged:\n{installed}");
    let parsed: toml::Table = installed.parse().unwrap_or_else(|e| panic!("{e}\n{installed}"));
    let server = &parsed["mcp_servers"]["cairn"];
    assert_eq!(server["args"].as_array().unwrap()[..3], ["serve".into(), "--expose".into(), "recall".into()]);
    assert_eq!(server["default_tools_approval_mode"].as_str(), Some("approve"));
    let groups = |event: &str| parsed["hooks"][event].as_array().unwrap().clone();
    let pre = groups("PreCompact");
    if user.contains("make lint") {
        assert!(parsed["mcp_servers"]["docs"].is_table(), "the user's server stays");
        assert_eq!(pre.first().unwrap()["hooks"][0]["command"].as_str(), Some("make lint"), "the user's hook stays first");
    }
    let ours = pre.last().unwrap()["hooks"][0]["command"].as_str().unwrap().to_string();
    assert!(ours.ends_with(" codex pre-compact --home /srv/cairn"), "{ours}");
    let start = groups("SessionStart");
    assert_eq!(start.last().unwrap()["matcher"].as_str(), Some("compact"));
    // Codex keys a hook's trust by file, event and position: Cairn's groups come after the user's.
    let file = codex_home.join("config.toml").display().to_string();
    let state = parsed["hooks"]["state"].as_table().unwrap();
    for (label, event) in [("pre_compact", "PreCompact"), ("session_start", "SessionStart")] {
        let key = format!("{file}:{label}:{}:0", groups(event).len() - 1);
        let hash = state.get(&key).and_then(|s| s["trusted_hash"].as_str()).unwrap_or_else(|| panic!("no trust for {key}:\n{installed}"));
        assert!(hash.starts_with("sha256:") && hash.len() == 7 + 64, "{hash}");
    }

    // Again: nothing changes.
    let said = ok(&codex_home, &["install", "--home", "/srv/cairn"]);
    assert!(said.contains("already"), "{said}");
    assert_eq!(config(&codex_home).unwrap(), installed);

    ok(&codex_home, &["uninstall"]);
    assert_eq!(config(&codex_home).as_deref(), Some(user), "uninstall restores the file byte for byte");
    let said = ok(&codex_home, &["uninstall"]);
    assert!(said.contains("No Cairn block"), "{said}");
}

#[test]
fn install_appends_after_the_users_config_and_uninstall_restores_it_byte_for_byte() {
    round_trip(USER_CONFIG);
}

#[test]
fn a_config_without_a_final_newline_comes_back_without_one() {
    round_trip(USER_CONFIG.trim_end());
    round_trip("# just a comment, no newline");
}

#[test]
fn without_a_config_install_creates_one_and_uninstall_deletes_it() {
    let dir = tempfile::tempdir().unwrap();
    let codex_home = dir.path().join("codex-home");
    ok(&codex_home, &["install"]);
    let installed = config(&codex_home).unwrap();
    assert!(installed.starts_with("# >>> cairn"), "{installed}");
    ok(&codex_home, &["uninstall"]);
    assert_eq!(config(&codex_home), None);
}

#[test]
fn reinstalling_with_another_home_replaces_cairns_block_only() {
    let dir = tempfile::tempdir().unwrap();
    let codex_home = dir.path();
    std::fs::write(codex_home.join("config.toml"), USER_CONFIG).unwrap();
    ok(codex_home, &["install", "--home", "/srv/a"]);
    // Something the user adds later, after Cairn's block, stays through both.
    let later = "\n[profiles.fast]\nmodel = \"gpt-5.5-mini\"\n";
    let with_later = config(codex_home).unwrap() + later;
    std::fs::write(codex_home.join("config.toml"), &with_later).unwrap();
    let said = ok(codex_home, &["install", "--home", "/srv/b"]);
    assert!(said.starts_with("Updated"), "{said}");
    let updated = config(codex_home).unwrap();
    assert!(updated.contains("/srv/b") && !updated.contains("/srv/a"), "{updated}");
    assert_eq!(updated.matches("[mcp_servers.cairn]").count(), 1);
    ok(codex_home, &["uninstall"]);
    assert_eq!(config(codex_home).unwrap(), format!("{USER_CONFIG}{later}"));
}

#[cfg(unix)]
#[test]
fn the_files_permissions_are_kept() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, USER_CONFIG).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    for verb in ["install", "uninstall"] {
        ok(dir.path(), &[verb]);
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600, "after {verb}");
    }
}

#[test]
fn configs_cairn_cannot_join_are_refused_untouched_naming_the_reason() {
    let refused = [
        // Someone else's server named cairn.
        ("[mcp_servers.cairn]\ncommand = \"other\"\n", "already registered outside Cairn's block"),
        // An inline array of groups cannot take a `[[hooks.PreCompact]]` after it.
        ("[hooks]\nPreCompact = [{ hooks = [{ type = \"command\", command = \"x\" }] }]\n", "cannot take Cairn's block"),
        // Not TOML at all: the line is named.
        ("model = \"a\"\nthis is not toml\n", "config.toml:2"),
    ];
    for (user, reason) in refused {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), user).unwrap();
        let out = cairn(dir.path(), &["install"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(reason), "{user:?}: {stderr}");
        assert_eq!(config(dir.path()).as_deref(), Some(user), "left untouched");
    }
}

#[test]
fn a_hook_payload_that_is_not_codexs_is_recorded_as_a_codex_failure() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("cairn");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["codex", "pre-compact", "--home", home.to_str().unwrap()])
        .env("CAIRN_LOG", "error")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), br#"{"session_id":"s1","transcript_path":null,"cwd":"/x"}"#).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let failures = std::fs::read_to_string(home.join("hook-failures.jsonl")).unwrap();
    assert!(failures.contains(r#""agent":"codex""#) && failures.contains(r#""hook":"pre-compact""#) && failures.contains("Codex's hook payload"), "{failures}");
}

#[test]
fn project_pins_the_servers_conversation_and_policy_is_checked_first() {
    let dir = tempfile::tempdir().unwrap();
    let project = std::fs::canonicalize(dir.path()).unwrap().join("spotter");
    std::fs::create_dir_all(&project).unwrap();
    let codex_home = dir.path().join("codex");
    ok(&codex_home, &["install", "--project", project.to_str().unwrap()]);
    let parsed: toml::Table = config(&codex_home).unwrap().parse().unwrap();
    let args: Vec<&str> = parsed["mcp_servers"]["cairn"]["args"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
    assert_eq!(args[args.len() - 2..], ["--project", project.to_str().unwrap()]);

    // A policy that does not parse is refused before anything is written.
    let other = dir.path().join("other");
    let policy = dir.path().join("broken.toml");
    std::fs::write(&policy, "[chain\n").unwrap();
    let out = cairn(&other, &["install", "--policy", policy.to_str().unwrap()]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("broken.toml"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(config(&other), None);
}
