//! A client of `cairn serve` over stdio: newline-delimited JSON-RPC, the server killed when the
//! client is dropped.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

pub struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Mcp {
    /// `cairn serve --home HOME --no-watch`, initialized.
    pub fn start(home: &Path) -> Self {
        Self::start_with(home, &[])
    }

    /// The same with more arguments.
    pub fn start_with(home: &Path, extra: &[&str]) -> Self {
        Self::start_with_env(home, extra, &[])
    }

    /// The same with more environment variables.
    pub fn start_with_env(home: &Path, extra: &[&str], env: &[(&str, &Path)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["serve", "--home", home.to_str().unwrap(), "--no-watch"])
            .args(extra)
            .env("CAIRN_LOG", "error")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let (stdin, stdout) = (child.stdin.take().unwrap(), BufReader::new(child.stdout.take().unwrap()));
        let mut mcp = Mcp { child, stdin, stdout, next: 1 };
        mcp.call("initialize", json!({"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "cairn-cli-test", "version": "0"}}));
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Writes `line` as it is, then a newline: a request built by hand, of any size.
    pub fn send_line(&mut self, line: &[u8]) {
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message the server writes.
    pub fn receive(&mut self) -> Value {
        let mut line = String::new();
        assert!(self.stdout.read_line(&mut line).unwrap() > 0, "cairn serve closed its output");
        serde_json::from_str(&line).unwrap()
    }

    /// A request's result; panics on a JSON-RPC error.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.receive();
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    /// A tool's structured result; `Err` with its text when the tool failed.
    pub fn tool(&mut self, name: &str, arguments: Value) -> Result<Value, String> {
        let result = self.call("tools/call", json!({"name": name, "arguments": arguments}));
        if result["isError"] == true {
            return Err(result["content"][0]["text"].as_str().unwrap_or_default().to_string());
        }
        Ok(result.get("structuredContent").cloned().unwrap_or_else(|| serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()))
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
