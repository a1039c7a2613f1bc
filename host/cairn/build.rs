// Tests that need what only CI is sure to have are marked ignored (so `cargo test` reports
// them as such) when it is absent outside CI; under `CI=true` they always run, and fail if it
// is missing:
// - `no_shared_transcripts`: the recorded sessions in `../shared/transcripts`;
// - `no_componentize_py`, `no_npm`: the Python and JavaScript plugin toolchains;
// - `no_python_mcp`: the official `mcp` Python package (the MCP client of the serve tests).

pub fn main() {
    let ci = std::env::var("CI").as_deref() == Ok("true");
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/transcripts");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo:rerun-if-env-changed=PATH");
    println!("cargo:rerun-if-changed={}", shared.display());
    for cfg in ["no_shared_transcripts", "no_componentize_py", "no_npm", "no_python_mcp"] {
        println!("cargo:rustc-check-cfg=cfg({cfg})");
    }
    if !shared.is_dir() && !ci {
        println!("cargo:rustc-cfg=no_shared_transcripts");
    }
    for (tool, cfg) in [("componentize-py", "no_componentize_py"), ("npm", "no_npm")] {
        if !ci && !on_path(tool) {
            println!("cargo:rustc-cfg={cfg}");
        }
    }
    let python_mcp = std::process::Command::new("python3").args(["-c", "import mcp"]).output().is_ok_and(|o| o.status.success());
    if !ci && !python_mcp {
        println!("cargo:rustc-cfg=no_python_mcp");
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}
