//! `cairn plugins build [DIR]`: one command for every plugin language. It reads the project's
//! `cairn-plugin.toml`, runs the language's own toolchain, and writes a loadable plugin
//! directory: `DIR/dist/<name>.wasm` and `DIR/dist/<name>.toml`.
//! - Rust (`Cargo.toml`): `cargo build --release --target wasm32-unknown-unknown`, then the core
//!   module becomes a component here (no WASI imports, no `wasm-tools` needed).
//! - Python (`app.py`): `componentize-py` against the project's `wit/` (or the repository's).
//! - JavaScript (`package.json`): the project's own `npm run build`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use cairn::Manifest;
use serde::Serialize;

#[derive(clap::Args)]
pub struct Args {
    /// The plugin project (holding `cairn-plugin.toml`).
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Where to write the plugin [default: DIR/dist].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Rust,
    Python,
    Js,
}

impl Language {
    /// By the project file each toolchain needs.
    fn detect(dir: &Path) -> Result<Self> {
        if dir.join("Cargo.toml").is_file() {
            Ok(Language::Rust)
        } else if dir.join("package.json").is_file() {
            Ok(Language::Js)
        } else if dir.join("app.py").is_file() {
            Ok(Language::Python)
        } else {
            bail!("{}: no Cargo.toml, package.json or app.py: not a Rust, JavaScript or Python plugin project", dir.display())
        }
    }
}

#[derive(Serialize)]
struct Built {
    name: String,
    language: Language,
    component: PathBuf,
    manifest: PathBuf,
    bytes: u64,
}

pub fn run(args: Args) -> Result<()> {
    let built = build(&args.dir, args.out.as_deref())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&built)?);
    } else {
        let dist = built.component.parent().unwrap_or(Path::new("."));
        println!("built {} ({} KiB, {:?})", built.component.display(), built.bytes / 1024, built.language);
        println!("check it:  cairn plugins check {}", built.component.display());
        println!("load it:   cairn compact SESSION --plugin-dir {} --policy POLICY.toml", dist.display());
    }
    Ok(())
}

fn build(dir: &Path, out: Option<&Path>) -> Result<Built> {
    let manifest_path = dir.join("cairn-plugin.toml");
    let text = std::fs::read_to_string(&manifest_path).with_context(|| format!("reading {}", manifest_path.display()))?;
    let manifest = Manifest::parse(&text, &manifest_path.display().to_string())?;
    let language = Language::detect(dir)?;
    let dist = out.map_or_else(|| dir.join("dist"), Path::to_path_buf);
    std::fs::create_dir_all(&dist).with_context(|| format!("creating {}", dist.display()))?;
    // Absolute, since the toolchains run inside the project.
    let dist = dist.canonicalize()?;
    let component = dist.join(format!("{}.wasm", manifest.name));
    tracing::info!(plugin = %manifest.label(), ?language, "building");
    match language {
        Language::Rust => build_rust(dir, &component)?,
        Language::Python => build_python(dir, &manifest, &component)?,
        Language::Js => build_js(dir, &manifest, &component)?,
    }
    ensure!(component.is_file(), "the build finished but wrote no {}", component.display());
    let manifest_out = dist.join(format!("{}.toml", manifest.name));
    std::fs::write(&manifest_out, text).with_context(|| format!("writing {}", manifest_out.display()))?;
    let bytes = std::fs::metadata(&component)?.len();
    Ok(Built { name: manifest.name, language, component, manifest: manifest_out, bytes })
}

/// Runs a toolchain command with its output on the terminal; a missing tool says how to get it.
fn run_tool(command: &mut Command, tool: &str, install: &str) -> Result<()> {
    let status = match command.status() {
        Ok(status) => status,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("`{tool}` is not installed: {install}"),
        Err(e) => return Err(e).with_context(|| format!("running {tool}")),
    };
    ensure!(status.success(), "`{tool}` failed ({status}); its output is above");
    Ok(())
}

fn build_rust(dir: &Path, component: &Path) -> Result<()> {
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo.args(["build", "--release", "--target", "wasm32-unknown-unknown", "--message-format=json-render-diagnostics"]).current_dir(dir).stderr(std::process::Stdio::inherit());
    // A build started from inside another cargo build (a test, a build script) must not
    // inherit its target directory, target or flags.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if (key.starts_with("CARGO_") && key != "CARGO_HOME") || key.starts_with("RUSTFLAGS") || key == "CARGO_ENCODED_RUSTFLAGS" {
            cargo.env_remove(key.as_ref());
        }
    }
    let output = match cargo.output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("`cargo` is not installed: install Rust with rustup"),
        Err(e) => return Err(e).context("running cargo"),
    };
    ensure!(output.status.success(), "`cargo build` failed ({}); its output is above (a missing target is added with `rustup target add wasm32-unknown-unknown`)", output.status);
    // The cdylib's `.wasm`, from cargo's own report of what it built.
    let module = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .flat_map(|m| m["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(PathBuf::from))
        .rfind(|f| f.extension().is_some_and(|x| x == "wasm"))
        .context("cargo built no .wasm: the crate needs `[lib] crate-type = [\"cdylib\"]`")?;
    let bytes = std::fs::read(&module).with_context(|| format!("reading {}", module.display()))?;
    let mut encoder = wit_component::ComponentEncoder::default();
    encoder.module(&bytes).with_context(|| format!("{}: not a plugin module (built with cairn-sdk's export macro?)", module.display()))?;
    let encoded = encoder.validate(true).encode().with_context(|| format!("turning {} into a component", module.display()))?;
    std::fs::write(component, encoded).with_context(|| format!("writing {}", component.display()))
}

/// The project's `npm run build` writes `dist/<name>.wasm`; copied from there when `--out` differs.
fn build_js(dir: &Path, manifest: &Manifest, component: &Path) -> Result<()> {
    run_tool(Command::new("npm").args(["run", "--silent", "build"]).current_dir(dir), "npm", "install Node.js 20+ and npm")?;
    let built = dir.join("dist").join(format!("{}.wasm", manifest.name)).canonicalize().context("`npm run build` wrote no dist/<name>.wasm")?;
    if built != component {
        std::fs::copy(&built, component).with_context(|| format!("copying {} to {}", built.display(), component.display()))?;
    }
    Ok(())
}

fn build_python(dir: &Path, manifest: &Manifest, component: &Path) -> Result<()> {
    // A scaffolded project carries its WIT and SDK; a plugin inside the Cairn repository uses
    // the repository's.
    let wit = if dir.join("wit").is_dir() { dir.join("wit") } else { in_ancestor(dir, "wit/0.2.0")? };
    let mut command = Command::new("componentize-py");
    command.arg("-d").arg(&wit).args(["-w", &manifest.kind.to_string(), "componentize", "app", "-p", "."]);
    if !dir.join("cairn_sdk").is_dir() {
        command.arg("-p").arg(in_ancestor(dir, "sdk/python")?);
    }
    command.arg("-o").arg(component).current_dir(dir);
    run_tool(&mut command, "componentize-py", "pip install componentize-py==0.25.1")
}

/// `relative` under the nearest ancestor of `dir` that has it.
fn in_ancestor(dir: &Path, relative: &str) -> Result<PathBuf> {
    let dir = dir.canonicalize().with_context(|| format!("{}", dir.display()))?;
    dir.ancestors().map(|a| a.join(relative)).find(|p| p.is_dir()).with_context(|| format!("{}: no `{relative}` here or above (a scaffolded project carries its own)", dir.display()))
}
