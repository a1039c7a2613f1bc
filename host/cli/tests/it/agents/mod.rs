//! The conformance suite: the real agent CLIs (pinned, from npm) with Cairn installed as a user
//! installs it, driven in their non-interactive modes against our scripted model server on
//! 127.0.0.1, asserting on what each agent sends the model after compaction.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod claude_code;
mod codex;
mod gemini;
mod model_server;
mod npm;
mod opencode;
mod pi;

/// Runs `command` with stdout and stderr into `prefix.out`/`.err` (no pipe to fill), in its own
/// process group; past `timeout` the whole group (the CLI, its hooks, its MCP servers) is
/// killed. Returns the exit code (`None` on a timeout or a signal) and the output.
pub fn run(mut command: Command, prefix: &Path, timeout: Duration) -> (Option<i32>, String, String) {
    use std::os::unix::process::CommandExt;
    let (out, err) = (prefix.with_extension("out"), prefix.with_extension("err"));
    let mut child = command
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {command:?}: {e}"));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            // The group by its id: `kill -s KILL -- -PGID` (procps' `kill -KILL -PGID` can read
            // the group as kill(-1)).
            let _ = Command::new("kill").args(["-s", "KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, std::fs::read_to_string(out).unwrap_or_default(), std::fs::read_to_string(err).unwrap_or_default())
}

/// `cairn ARGS` with HOME set, as a user runs it; its stdout, or a panic with its stderr.
pub fn cairn(args: &[&str], home: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).env("HOME", home).env("CAIRN_LOG", "error").output().unwrap();
    assert!(out.status.success(), "cairn {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}
