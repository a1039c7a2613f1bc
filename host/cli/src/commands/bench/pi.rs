//! Pi 0.73.1's own compaction code, run in node as the baseline. The script and its pinned
//! lockfile are embedded; they are installed once into the cache folder with `npm ci`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

const FILES: [(&str, &str); 3] = [("bench.mjs", include_str!("pi/bench.mjs")), ("package.json", include_str!("pi/package.json")), ("package-lock.json", include_str!("pi/package-lock.json"))];

pub struct Baseline {
    script: PathBuf,
}

pub struct Cold {
    pub ms: f64,
    pub rss_mib: f64,
}

impl Baseline {
    /// Installs Pi from npm on first use. Without node: none outside CI, an error under CI.
    pub fn install() -> Result<Option<Self>> {
        if Command::new("node").arg("--version").output().is_err() {
            if std::env::var("CI").as_deref() == Ok("true") {
                bail!("node is not installed: Pi's baseline needs Node.js 20+ (or pass --no-pi)");
            }
            eprintln!("node is not installed: Pi's baseline is left out (install Node.js 20+ to compare)");
            return Ok(None);
        }
        let dir = cairn::cache_dir().unwrap_or_else(std::env::temp_dir).join("bench-pi-0.73.1");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for (name, text) in FILES {
            let path = dir.join(name);
            if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
                std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            }
        }
        if !dir.join("node_modules/@mariozechner/pi-coding-agent").is_dir() {
            eprintln!("installing Pi 0.73.1 from npm into {} (once)", dir.display());
            let status = Command::new("npm").args(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--silent"]).current_dir(&dir).status().context("running npm")?;
            anyhow::ensure!(status.success(), "npm ci failed in {}", dir.display());
        }
        Ok(Some(Baseline { script: dir.join("bench.mjs") }))
    }

    /// A cold node process preparing a compaction from the file: median wall time, peak RSS.
    pub fn cold(&self, file: &Path, runs: usize) -> Result<Cold> {
        let mut times = Vec::new();
        let mut rss_mib: f64 = 0.0;
        for _ in 0..runs {
            let (ms, stdout, _) = super::timed_process(Command::new("node").arg(&self.script).arg("cold").arg(file))?;
            let report: Value = serde_json::from_str(&stdout).with_context(|| format!("Pi's bench printed {stdout}"))?;
            times.push(ms);
            rss_mib = rss_mib.max(report["rss_peak_mb"].as_f64().context("Pi's bench printed no rss_peak_mb")?);
        }
        Ok(Cold { ms: super::median(times), rss_mib })
    }

    /// p50 of Pi's warm end-to-end preparation, in one process.
    pub fn warm(&self, file: &Path, iterations: usize) -> Result<f64> {
        self.field(&["warm".as_ref(), file.as_os_str(), "--iterations".as_ref(), iterations.to_string().as_ref()], "p50_ms")
    }

    /// Pi's turn-by-turn replay of the session, in one process.
    pub fn replay(&self, file: &Path) -> Result<f64> {
        self.field(&["replay".as_ref(), file.as_os_str()], "total_ms")
    }

    /// p50 of warm compactions through the Node package's addon (`package`: a folder holding
    /// `cairn-compaction`), in a node process, into the home `home`.
    pub fn addon(&self, file: &Path, iterations: usize, package: &Path, home: &Path) -> Result<f64> {
        let package = package.canonicalize().with_context(|| format!("--node-package {}", package.display()))?;
        let iterations = iterations.to_string();
        let args = ["addon".as_ref(), file.as_os_str(), "--iterations".as_ref(), iterations.as_ref(), "--package".as_ref(), package.as_os_str(), "--home".as_ref(), home.as_os_str()];
        self.field(&args, "p50_ms")
    }

    fn field(&self, args: &[&std::ffi::OsStr], key: &str) -> Result<f64> {
        let out = Command::new("node").arg(&self.script).args(args).output().context("running node")?;
        anyhow::ensure!(out.status.success(), "Pi's bench failed: {}", String::from_utf8_lossy(&out.stderr));
        let value: Value = serde_json::from_slice(&out.stdout).with_context(|| format!("Pi's bench printed {}", String::from_utf8_lossy(&out.stdout)))?;
        value[key].as_f64().with_context(|| format!("Pi's bench printed no `{key}`: {value}"))
    }
}
