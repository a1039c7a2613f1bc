//! `cairn new strategy|trigger|commit-policy NAME --lang rust|python|js`: a plugin project that
//! builds with one command. The templates live in `sdk/<lang>/template/` (`common/` plus one
//! folder per kind); the SDK and the WIT contract are written into the project too, so it
//! builds with no checkout of Cairn.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cairn::World;
use include_dir::{include_dir, Dir, DirEntry};
use serde::Serialize;

static WIT: Dir = include_dir!("$CARGO_MANIFEST_DIR/../../wit/0.2.0");
/// The checkpoint's schema, versioned apart from the contract (the Rust SDK includes it).
static CHECKPOINT_SCHEMA: Dir = include_dir!("$CARGO_MANIFEST_DIR/../../wit/checkpoint");
static RUST_TEMPLATE: Dir = include_dir!("$CARGO_MANIFEST_DIR/../../sdk/rust/template");
static RUST_SDK: Dir = include_dir!("$CARGO_MANIFEST_DIR/../../sdk/rust/src");
static RUST_SDK_MANIFEST: &str = include_str!("../../../../sdk/rust/Cargo.toml");
static RULES: Dir = include_dir!("$CARGO_MANIFEST_DIR/../rules/src");
static RULES_MANIFEST: &str = include_str!("../../../rules/Cargo.toml");
static PYTHON_TEMPLATE: Dir = include_dir!("$CARGO_MANIFEST_DIR/../../sdk/python/template");
static PYTHON_SDK: Dir = include_dir!("$CARGO_MANIFEST_DIR/../../sdk/python/cairn_sdk");
static JS_TEMPLATE: Dir = include_dir!("$CARGO_MANIFEST_DIR/../../sdk/js/template");
/// The JS SDK's published files (its package.json `files`), written to `cairn-sdk/`.
static JS_SDK: [(&str, &Dir); 3] = [
    ("src", &include_dir!("$CARGO_MANIFEST_DIR/../../sdk/js/src")),
    ("bin", &include_dir!("$CARGO_MANIFEST_DIR/../../sdk/js/bin")),
    ("types", &include_dir!("$CARGO_MANIFEST_DIR/../../sdk/js/types")),
];
static JS_SDK_FILES: [(&str, &str); 2] = [("package.json", include_str!("../../../../sdk/js/package.json")), ("index.js", include_str!("../../../../sdk/js/index.js"))];

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    Rust,
    Python,
    Js,
}

#[derive(clap::Args)]
pub struct Args {
    /// What the plugin decides: `strategy` (what replaces history), `trigger` (when) or
    /// `commit-policy` (whether the swap is safe now).
    #[arg(value_parser = parse_kind)]
    kind: World,
    /// The plugin's name: 1-64 characters of a-z 0-9 -, starting with a letter.
    name: String,
    /// The language of the project: its SDK, build and test commands.
    #[arg(long, value_enum)]
    lang: Lang,
    /// Where to create it [default: ./NAME].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
}

fn parse_kind(text: &str) -> Result<World, String> {
    serde_json::from_value(serde_json::Value::String(text.into())).map_err(|_| "expected strategy, trigger or commit-policy".to_string())
}

#[derive(Serialize)]
struct Created {
    dir: PathBuf,
    name: String,
    kind: World,
    lang: Lang,
    files: Vec<PathBuf>,
    /// Run inside `dir`.
    test: &'static str,
    build: &'static str,
}

pub fn run(args: Args) -> Result<()> {
    let created = create(&args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&created)?);
        return Ok(());
    }
    println!("created {} ({:?} {} plugin, {} files)", created.dir.display(), created.lang, created.kind, created.files.len());
    println!("  cd {}", created.dir.display());
    println!("  {:<40} # its own tests", created.test);
    println!("  {:<40} # → dist/{}.wasm + dist/{}.toml", created.build, created.name, created.name);
    println!("  cairn plugins check dist/{}.wasm", created.name);
    Ok(())
}

fn create(args: &Args) -> Result<Created> {
    let name = &args.name;
    let valid = name.len() <= 64 && name.starts_with(|c: char| c.is_ascii_lowercase()) && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid {
        bail!("plugin name {name:?} must be 1-64 characters of a-z 0-9 -, starting with a letter");
    }
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from(name));
    if dir.exists() && std::fs::read_dir(&dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("{} already exists and is not empty", dir.display());
    }
    let kind = args.kind.to_string();
    let substitute = |text: &str| text.replace("{{name}}", name).replace("{{name_snake}}", &name.replace('-', "_")).replace("{{kind}}", &kind);

    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    let template = match args.lang {
        Lang::Rust => &RUST_TEMPLATE,
        Lang::Python => &PYTHON_TEMPLATE,
        Lang::Js => &JS_TEMPLATE,
    };
    for part in ["common", kind.as_str()] {
        let folder = template.get_dir(part).with_context(|| format!("the {:?} template has no `{part}` folder", args.lang))?;
        for file in walk(folder) {
            let relative = file.path().strip_prefix(part).expect("inside its folder");
            let contents = match file.contents_utf8() {
                Some(text) => substitute(text).into_bytes(),
                None => file.contents().to_vec(),
            };
            files.push((PathBuf::from(substitute(&relative.to_string_lossy())), contents));
        }
    }
    for file in walk(&WIT) {
        files.push((Path::new("wit").join(file.path()), file.contents().to_vec()));
    }
    for file in walk(&CHECKPOINT_SCHEMA) {
        files.push((Path::new("wit/checkpoint").join(file.path()), file.contents().to_vec()));
    }
    match args.lang {
        Lang::Rust => files.extend(rust_vendor()),
        Lang::Python => files.extend(walk(&PYTHON_SDK).into_iter().map(|f| (Path::new("cairn_sdk").join(f.path()), f.contents().to_vec()))),
        Lang::Js => {
            let sdk = Path::new("cairn-sdk");
            files.extend(JS_SDK_FILES.iter().map(|(name, text)| (sdk.join(name), text.as_bytes().to_vec())));
            for (folder, dir) in &JS_SDK {
                files.extend(walk(dir).into_iter().map(|f| (sdk.join(folder).join(f.path()), f.contents().to_vec())));
            }
        }
    }

    for (relative, contents) in &files {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
    }
    let (test, build) = match args.lang {
        Lang::Rust => ("cargo test", "cairn plugins build"),
        Lang::Python => ("python3 -m unittest", "cairn plugins build"),
        Lang::Js => ("npm install && npm test", "cairn plugins build"),
    };
    Ok(Created { dir, name: name.clone(), kind: args.kind, lang: args.lang, files: files.into_iter().map(|(p, _)| p).collect(), test, build })
}

/// The Rust SDK and the rules crate under `vendor/`, their paths pointed at the project's own
/// `wit/` and at each other.
fn rust_vendor() -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = vec![
        (PathBuf::from("vendor/cairn-sdk/Cargo.toml"), RUST_SDK_MANIFEST.replace("../../host/rules", "../cairn-rules").into_bytes()),
        (PathBuf::from("vendor/cairn-rules/Cargo.toml"), RULES_MANIFEST.as_bytes().to_vec()),
    ];
    for file in walk(&RUST_SDK) {
        // The project's `wit/` is 0.2.0; the SDK may still name 0.1.0 for the checkpoint schema (the same in both).
        let text = file.contents_utf8().unwrap_or_default().replace("/wit/0.2.0", "/wit").replace("/wit/0.1.0", "/wit");
        files.push((Path::new("vendor/cairn-sdk/src").join(file.path()), text.into_bytes()));
    }
    for file in walk(&RULES) {
        files.push((Path::new("vendor/cairn-rules/src").join(file.path()), file.contents().to_vec()));
    }
    files
}

/// Every file below `dir`, depth first, without build leftovers (`__pycache__`, `node_modules`).
fn walk<'a>(dir: &'a Dir<'a>) -> Vec<&'a include_dir::File<'a>> {
    let mut files = Vec::new();
    for entry in dir.entries() {
        match entry {
            DirEntry::File(file) => files.push(file),
            DirEntry::Dir(sub) if sub.path().file_name().is_some_and(|n| n == "__pycache__" || n == "node_modules") => {}
            DirEntry::Dir(sub) => files.extend(walk(sub)),
        }
    }
    files
}
