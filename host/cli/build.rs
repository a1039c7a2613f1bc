// The test-only cfgs (`no_npm`, `no_shared_transcripts`, …) of the library's build script: one
// definition for both crates, and a build script inside this package (an sdist packs only packages).
mod cfgs {
    include!("../cairn/build.rs");
}

use std::path::Path;

fn main() {
    cfgs::main();
    // `include_dir!` does not tell cargo which files `cairn new` embeds, and a build script that
    // names any file turns off cargo's watch of the package: name them, or an edit to the SDK or
    // the contract would leave `cairn new` scaffolding the old one.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for embedded in [
        "wit/0.2.0",
        "wit/checkpoint",
        "sdk/rust/src",
        "sdk/rust/template",
        "sdk/rust/Cargo.toml",
        "sdk/python/template",
        "sdk/python/cairn_sdk",
        "sdk/js/template",
        "sdk/js/src",
        "sdk/js/bin",
        "sdk/js/types",
        "sdk/js/package.json",
        "sdk/js/index.js",
        "host/rules/src",
        "host/rules/Cargo.toml",
    ] {
        watch(&root.join(embedded));
    }
}

/// Files one by one, not the folder: running the SDKs' own tests writes `__pycache__` (and
/// `node_modules`) beside them, which must not rebuild the CLI.
fn watch(path: &Path) {
    if path.is_file() {
        println!("cargo:rerun-if-changed={}", path.display());
    } else if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            if !matches!(entry.file_name().to_str(), Some("__pycache__" | "node_modules")) {
                watch(&entry.path());
            }
        }
    }
}
