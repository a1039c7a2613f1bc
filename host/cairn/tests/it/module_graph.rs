//! The library's top-level modules (`src/<name>.rs` or `src/<name>/`) depend on each other
//! without a circle, so each can be read, tested and replaced from the bottom up. Test code
//! (`#[cfg(test)] mod …`) may reach anywhere and is not counted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            rust_files(&entry.unwrap().path(), out);
        }
    } else if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// The code of a file without its test module (by convention the file's last item).
fn non_test_code(text: &str) -> &str {
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]") {
        let at = from + at;
        if text[at + "#[cfg(test)]".len()..].trim_start().starts_with("mod ") {
            return &text[..at];
        }
        from = at + 1;
    }
    text
}

/// Which top-level modules each one names (`crate::<module>`), with a file that does.
fn graph(src: &Path) -> BTreeMap<String, BTreeMap<String, PathBuf>> {
    let name = |p: &Path| p.file_stem().unwrap().to_string_lossy().into_owned();
    let top: BTreeSet<String> = std::fs::read_dir(src).unwrap().map(|e| name(&e.unwrap().path())).filter(|m| m != "lib").collect();
    let mut edges: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for module in &top {
        let mut files = Vec::new();
        rust_files(&src.join(module), &mut files);
        rust_files(&src.join(format!("{module}.rs")), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (at, _) in non_test_code(&text).match_indices("crate::") {
                let rest = &text[at + "crate::".len()..];
                let used: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if used != *module && top.contains(&used) {
                    edges.entry(module.clone()).or_default().entry(used).or_insert_with(|| file.clone());
                }
            }
        }
    }
    edges
}

/// A circle reachable from `from` (depth first; `done`: modules fully explored without one),
/// as the modules on it.
fn circle(edges: &BTreeMap<String, BTreeMap<String, PathBuf>>, from: &str, path: &mut Vec<String>, done: &mut BTreeSet<String>) -> Option<Vec<String>> {
    if let Some(at) = path.iter().position(|m| m == from) {
        return Some([&path[at..], &[from.to_string()]].concat());
    }
    if done.contains(from) {
        return None;
    }
    path.push(from.to_string());
    for next in edges.get(from).into_iter().flat_map(|e| e.keys()) {
        if let Some(cycle) = circle(edges, next, path, done) {
            return Some(cycle);
        }
    }
    path.pop();
    done.insert(from.to_string());
    None
}

#[test]
fn the_librarys_modules_depend_on_each_other_without_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = graph(&src);
    assert!(edges.get("lifecycle").is_some_and(|e| e.contains_key("storage")), "the graph is read: {edges:?}");
    let mut done = BTreeSet::new();
    for module in edges.keys() {
        if let Some(cycle) = circle(&edges, module, &mut Vec::new(), &mut done) {
            let steps: Vec<String> = cycle.windows(2).map(|w| format!("{} → {} ({})", w[0], w[1], edges[&w[0]][&w[1]].strip_prefix(&src).unwrap().display())).collect();
            panic!("a circle between the library's modules:\n{}", steps.join("\n"));
        }
    }
}
