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
pub(crate) mod npm;
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
            let _ = kill_group(child.id());
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

/// SIGKILL to the process group `pgid`. The `--` matters: without it procps-ng 4.0.2's
/// `kill -KILL -PGID` signals the group of the first digit only (`kill(-3, …)` for -31666), and
/// for an id starting with 1 that is `kill(-1, SIGKILL)`: every process the user may signal.
pub fn kill_group(pgid: u32) -> std::io::Result<std::process::ExitStatus> {
    Command::new("kill").args(["-s", "KILL", "--", &format!("-{pgid}")]).stderr(Stdio::null()).status()
}

/// The last `max` bytes of `text` (on a char boundary), marked when cut.
pub fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}
