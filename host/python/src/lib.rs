//! `cairn._cairn`: the harness API for Python, and the `cairn` command. A thin shell: a host is
//! opened as the command opens it (`cairn_cli::harness`), every operation goes through
//! `Harness::call` by name, JSON in and out, and the command line is `cairn_cli::command`.
//! The GIL is released while Cairn works, so one host serves many Python threads. The Pythonic
//! API — message objects in and out, one exception class per error code, `async` forms — is
//! `python/cairn/__init__.py`, over this module.

use std::path::PathBuf;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_cairn, HarnessError, PyException, "A failed call: `args` is (code, message); the `cairn` package raises the class of its code.");

/// A host: its plugins compiled once, its policy, its home. Thread-safe.
#[pyclass(frozen, module = "cairn._cairn")]
struct Host {
    harness: cairn::Harness,
}

#[pymethods]
impl Host {
    /// Opens a host as the `cairn` command would: the bundled plugins and those in
    /// `plugin_dirs`, `policy` (a TOML file; the embedded default when None) checked against
    /// them, over `home` (default: `$CAIRN_HOME`, else `~/.local/share/cairn`).
    #[new]
    #[pyo3(signature = (home=None, policy=None, plugin_dirs=Vec::new()))]
    fn new(py: Python<'_>, home: Option<PathBuf>, policy: Option<PathBuf>, plugin_dirs: Vec<PathBuf>) -> PyResult<Self> {
        let opened = py.detach(|| cairn_cli::harness(home, policy.as_deref(), &plugin_dirs));
        opened.map(|harness| Host { harness }).map_err(|e| HarnessError::new_err((e.code(), e.to_string())))
    }

    /// Runs `operation` (see `OPERATIONS`) on `request`, a JSON object as text; answers JSON
    /// text, or raises `HarnessError(code, message)`.
    fn call(&self, py: Python<'_>, operation: &str, request: &str) -> PyResult<String> {
        let request: serde_json::Value = serde_json::from_str(request).map_err(|e| HarnessError::new_err(("invalid-request", format!("{operation}: the request is not JSON: {e}"))))?;
        let answer = py.detach(|| self.harness.call(operation, request));
        answer.map(|value| value.to_string()).map_err(|e| HarnessError::new_err((e.code(), e.to_string())))
    }
}

/// The `cairn` command with `args` (`sys.argv`), in this process; its exit status.
#[pyfunction]
fn command(py: Python<'_>, args: Vec<String>) -> u8 {
    py.detach(|| cairn_cli::command(args))
}

#[pymodule]
fn _cairn(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Host>()?;
    m.add_function(wrap_pyfunction!(command, m)?)?;
    m.add("HarnessError", m.py().get_type::<HarnessError>())?;
    m.add("OPERATIONS", cairn::harness::OPERATIONS.to_vec())?;
    m.add("ERROR_CODES", cairn::harness::Error::CODES.to_vec())?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
