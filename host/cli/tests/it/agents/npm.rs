//! The agents' CLIs, installed from npm at pinned versions (a version bump is one line here),
//! once per build into `CARGO_TARGET_TMPDIR`, and each run with a fresh HOME.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// `(npm package, version)` of every agent the suite drives.
pub const CLAUDE_CODE: (&str, &str) = ("@anthropic-ai/claude-code", "2.1.328");
pub const PI: (&str, &str) = ("@mariozechner/pi-coding-agent", "0.73.1");
pub const CODEX: (&str, &str) = ("@openai/codex", "0.169.0");
pub const GEMINI_CLI: (&str, &str) = ("@google/gemini-cli", "0.61.0");
pub const OPENCODE: (&str, &str) = ("opencode-ai", "1.18.33");

/// Installs `package@version` (with `--ignore-scripts` unless `scripts`) into its own folder and
/// returns that folder (holding `node_modules/.bin`). A second call reuses it.
pub fn install((package, version): (&str, &str), scripts: bool) -> PathBuf {
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("agents").join(format!("{}@{version}", package.replace('/', "+")));
    let done = dir.join(".installed");
    if done.is_file() {
        return dir;
    }
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("package.json"), r#"{"name":"cairn-agent-under-test","private":true}"#).unwrap();
    let mut npm = Command::new("npm");
    npm.args(["install", "--no-audit", "--no-fund", "--no-save", "--loglevel=error", &format!("{package}@{version}")]).current_dir(&dir);
    if !scripts {
        npm.arg("--ignore-scripts");
    }
    let out = npm.output().unwrap_or_else(|e| panic!("npm: {e}"));
    assert!(out.status.success(), "npm install {package}@{version} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&done, "").unwrap();
    dir
}

/// `node_modules/.bin/<name>` of an install.
pub fn bin(install: &Path, name: &str) -> PathBuf {
    let path = install.join("node_modules/.bin").join(name);
    assert!(path.exists(), "{} has no {name}", install.display());
    path
}
