//! The Node-API addon behind the `cairn-compaction` package: the harness API for Node.js, and
//! the `cairn` command. A thin shell: a host is opened as the command opens it
//! (`cairn_cli::harness`), every operation goes through `Harness::call` by name, JSON in and out,
//! on a libuv worker thread (a Promise; the event loop never waits on Cairn), and the command line
//! is `cairn_cli::command`. The JavaScript API — message arrays in and out, one error class per
//! code — is `index.js`, over this addon; the types of this layer are generated from it
//! (`native.d.ts`).

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

/// How a call ended: `answer` (JSON text), or the harness error's stable `code` and `message`.
#[napi(object)]
pub struct Outcome {
    pub answer: Option<String>,
    pub code: Option<String>,
    pub message: Option<String>,
}

/// A host: its plugins compiled once, its policy, its home. Shared by every call in flight.
#[napi]
pub struct NativeHost {
    harness: Arc<cairn::Harness>,
}

#[napi]
impl NativeHost {
    /// Opens a host as the `cairn` command would: the bundled plugins and those in
    /// `pluginDirs`, `policy` (a TOML file; the embedded default when absent) checked against
    /// them, over `home` (default: `$CAIRN_HOME`, else `~/.local/share/cairn`). Throws an error
    /// whose `code` is `policy-invalid`, `plugins-invalid` or `home-unavailable`.
    #[napi(constructor)]
    pub fn new(home: Option<String>, policy: Option<String>, plugin_dirs: Option<Vec<String>>) -> Result<Self, String> {
        let plugin_dirs: Vec<std::path::PathBuf> = plugin_dirs.unwrap_or_default().into_iter().map(Into::into).collect();
        let policy = policy.map(std::path::PathBuf::from);
        match cairn_cli::harness(home.map(Into::into), policy.as_deref(), &plugin_dirs) {
            Ok(harness) => Ok(NativeHost { harness: Arc::new(harness) }),
            Err(e) => Err(Error::new(e.code().to_string(), e.to_string())),
        }
    }

    /// Runs `operation` (see `operations()`) on `request`, a JSON object as text, off the event
    /// loop. Never rejects for a harness error: the outcome carries its code.
    #[napi(ts_return_type = "Promise<Outcome>")]
    pub fn call(&self, operation: String, request: String) -> AsyncTask<Call> {
        AsyncTask::new(Call { harness: Arc::clone(&self.harness), operation, request })
    }
}

/// One harness call on a libuv worker thread.
pub struct Call {
    harness: Arc<cairn::Harness>,
    operation: String,
    request: String,
}

impl Task for Call {
    type Output = Outcome;
    type JsValue = Outcome;

    fn compute(&mut self) -> Result<Outcome> {
        let failed = |code: &str, message: String| Outcome { answer: None, code: Some(code.to_string()), message: Some(message) };
        let request: serde_json::Value = match serde_json::from_str(&self.request) {
            Ok(request) => request,
            Err(e) => return Ok(failed("invalid-request", format!("{}: the request is not JSON: {e}", self.operation))),
        };
        Ok(match self.harness.call(&self.operation, request) {
            Ok(answer) => Outcome { answer: Some(answer.to_string()), code: None, message: None },
            Err(e) => failed(e.code(), e.to_string()),
        })
    }

    fn resolve(&mut self, _: Env, outcome: Outcome) -> Result<Outcome> {
        Ok(outcome)
    }
}

/// The `cairn` command with `args` (`process.argv`, from the program name on), in this
/// process; its exit status.
#[napi]
pub fn command(args: Vec<String>) -> u8 {
    cairn_cli::command(args)
}

/// The operations `NativeHost.call` runs (the names of `cairn serve`'s tools).
#[napi]
pub fn operations() -> Vec<&'static str> {
    cairn::harness::OPERATIONS.to_vec()
}

/// Every stable error code a call can end with.
#[napi]
pub fn error_codes() -> Vec<&'static str> {
    cairn::harness::Error::CODES.to_vec()
}

/// This addon's version (the Cairn it was built from).
#[napi]
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}
