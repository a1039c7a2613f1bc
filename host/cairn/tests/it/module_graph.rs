//! The library's modules (and the CLI's) depend on each other without a circle, at every depth: in each folder
//! (the crate's root included) the modules it holds — a file, or a folder counted whole — can
//! be read, tested and replaced from the bottom up. A module's references to its own parent
//! (`super::` from a child to the `mod.rs` that declares it) are the folder's business and not
//! counted; test code (`#[cfg(test)] mod …`) may reach anywhere.

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

/// A file's module path: `storage/archive.rs` → [storage, archive]; `storage/mod.rs` → [storage].
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let mut path: Vec<String> = file.strip_prefix(src).unwrap().with_extension("").iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if path.last().is_some_and(|last| last == "mod" || (path.len() == 1 && (last == "lib" || last == "main"))) {
        path.pop();
    }
    path
}

fn ident(text: &str) -> &str {
    let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(text.len());
    &text[..end]
}

/// The module paths `code` names (`crate::a::b`, `super::c`, `self::d`, `super::{e, f::g}`),
/// made absolute from `module`, the file's own path.
fn references(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(start) {
            if at > 0 && code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut base: Vec<String> = match start {
                "crate::" => Vec::new(),
                "self::" => module.to_vec(),
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            let mut rest = &code[at + start.len()..];
            while let Some(more) = rest.strip_prefix("super::") {
                base.pop();
                rest = more;
            }
            let items: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group[..group.find('}').unwrap_or(group.len())].split(',').collect(),
                None => vec![rest],
            };
            for item in items {
                let mut path = base.clone();
                let mut item = item.trim_start();
                loop {
                    let name = ident(item);
                    if name.is_empty() || name == "self" {
                        break;
                    }
                    path.push(name.to_string());
                    match item[name.len()..].strip_prefix("::") {
                        Some(next) => item = next,
                        None => break,
                    }
                }
                found.push(path);
            }
        }
    }
    found
}

/// Per folder (by module path), which of its modules name which others, with a file that does.
type Edges = BTreeMap<String, BTreeMap<String, PathBuf>>;

fn graphs(src: &Path) -> BTreeMap<Vec<String>, Edges> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: Vec<(PathBuf, Vec<String>)> = files.iter().map(|f| (f.clone(), module_path(src, f))).collect();
    let mut children: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for (_, path) in &modules {
        if let Some((last, folder)) = path.split_last() {
            children.entry(folder.to_vec()).or_default().insert(last.clone());
        }
    }
    let mut graphs: BTreeMap<Vec<String>, Edges> = BTreeMap::new();
    for (file, module) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        for target in references(module, non_test_code(&text)) {
            for (folder, kids) in &children {
                let depth = folder.len();
                let (Some(from), Some(to)) = (module.get(depth), target.get(depth)) else { continue };
                if module[..depth] == folder[..] && target[..depth] == folder[..] && from != to && kids.contains(to) {
                    graphs.entry(folder.clone()).or_default().entry(from.clone()).or_default().entry(to.clone()).or_insert_with(|| file.clone());
                }
            }
        }
    }
    graphs
}

/// A circle reachable from `from` (depth first; `done`: modules fully explored without one),
/// as the modules on it.
fn circle(edges: &Edges, from: &str, path: &mut Vec<String>, done: &mut BTreeSet<String>) -> Option<Vec<String>> {
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

/// Every circle's description, one per folder that has one.
fn circles(src: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (folder, edges) in graphs(src) {
        let mut done = BTreeSet::new();
        for module in edges.keys() {
            if let Some(cycle) = circle(&edges, module, &mut Vec::new(), &mut done) {
                let steps: Vec<String> = cycle.windows(2).map(|w| format!("{} → {} ({})", w[0], w[1], edges[&w[0]][&w[1]].strip_prefix(src).unwrap().display())).collect();
                let folder = if folder.is_empty() { "the crate's root".to_string() } else { folder.join("::") };
                found.push(format!("in {folder}: {}", steps.join(", ")));
                break;
            }
        }
    }
    found
}

#[test]
fn the_librarys_modules_depend_on_each_other_without_a_circle_at_any_depth() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graphs = graphs(&src);
    assert!(graphs[&Vec::new()].get("lifecycle").is_some_and(|e| e.contains_key("storage")), "the root's graph is read: {:?}", graphs[&Vec::new()]);
    assert!(graphs[&vec!["storage".to_string()]].get("archive").is_some_and(|e| e.contains_key("backend")), "a folder's graph is read");
    let found = circles(&src);
    assert!(found.is_empty(), "circles between the library's modules:\n{}", found.join("\n"));
}

/// The same for the command-line crate, the shell over the library.
#[test]
fn the_clis_modules_depend_on_each_other_without_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/src");
    assert!(graphs(&src).contains_key(&vec!["commands".to_string()]), "the CLI's sources are read");
    let found = circles(&src);
    assert!(found.is_empty(), "circles between the CLI's modules:\n{}", found.join("\n"));
}

/// The check itself: a circle two folders down, through `super::` and a `use` group, is found
/// and named; a child naming its parent is not a circle.
#[test]
fn a_circle_inside_a_folder_is_found_and_named() {
    let src = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = src.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod model;\n");
    write("model/mod.rs", "mod http;\nmod openai;\npub use http::Client;\n");
    write("model/http.rs", "use super::{openai, Wire};\npub struct Client;\n");
    write("model/openai.rs", "pub fn f() -> Option<u32> { super::http::number_after(\"\", \"\") }\n#[cfg(test)]\nmod tests { use crate::model::http; }\n");
    let found = circles(src.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("in model: http → openai (model/http.rs), openai → http (model/openai.rs)"), "{found:?}");
    write("model/openai.rs", "pub fn f() -> Option<u32> { crate::model::Client; None }\n");
    assert!(circles(src.path()).is_empty());
}
