//! The layers of src/ (docs/architecture.md): imports point down only, a face never imports
//! another face it does not start, and no import circle (one module in several files aside).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The leaves every layer may import: safe text, and QR codes as text.
const LEAVES: &[&str] = &["text", "qr"];

/// What each top-level module may import besides itself and the [`LEAVES`].
const MAY_IMPORT: &[(&str, &[&str])] = &[
    ("qr", &[]),
    ("kernel", &[]),
    ("store", &["kernel"]),
    ("runtime", &["kernel", "store"]),
    ("flows", &["kernel", "store", "runtime"]),
    ("mcp", &["kernel", "store", "flows"]),
    ("board", &["kernel", "store", "flows"]),
    // The web face also reads and writes the pairing channel (`runtime::pairing`).
    ("web", &["kernel", "store", "runtime", "flows"]),
    // The command line is the binary's entry: it starts the board and the MCP server.
    (
        "cli",
        &["kernel", "store", "runtime", "flows", "board", "mcp", "web"],
    ),
];

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file under src/ (`board/panes/mod.rs` is `board::panes`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts
        .last()
        .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
    {
        parts.pop();
    }
    parts
}

/// The code of a file without its tests, comments, re-exports and `mod` lines.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut skip_depth: Option<i64> = None;
    let mut depth = 0i64;
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t == "#[cfg(test)]" && lines.peek().is_some_and(|n| n.trim().starts_with("mod ")) {
            let next = lines.next().unwrap_or_default();
            if next.trim_end().ends_with('{') {
                skip_depth = Some(depth);
                depth += 1;
            }
            continue;
        }
        let opens = t.matches('{').count() as i64 - t.matches('}').count() as i64;
        if let Some(d) = skip_depth {
            depth += opens;
            if depth <= d {
                skip_depth = None;
            }
            continue;
        }
        depth += opens;
        let plain =
            t.starts_with("//") || t.starts_with("pub use ") || t.starts_with("pub(crate) use ");
        if !plain && !t.starts_with("mod ") && !t.starts_with("pub mod ") {
            out.push_str(t);
            out.push('\n');
        }
    }
    out
}

/// The module paths a file's code names: `crate::a::b::c`, `super::x`, and `use crate::{a, b}`.
fn named_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let word = |c: char| {
        c.is_alphanumeric() || c == '_' || c == ':' || c == '{' || c == '}' || c == ',' || c == ' '
    };
    for (i, _) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
    {
        if i > 0 && code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest: String = code[i..]
            .chars()
            .take_while(|c| word(*c) && *c != '\n')
            .collect();
        let rest = rest.split([';', ')']).next().unwrap_or_default();
        // The base: crate's root, or this module's parent (a mod.rs is its own folder's module).
        let (base, tail) = if let Some(t) = rest.strip_prefix("crate::") {
            (Vec::new(), t)
        } else {
            let mut b = module.to_vec();
            let mut t = rest;
            while let Some(x) = t.strip_prefix("super::") {
                b.pop();
                t = x;
            }
            (b, t)
        };
        let head: String = tail.chars().take_while(|c| *c != '{').collect();
        let mut path = base.clone();
        path.extend(
            head.split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from),
        );
        if let Some(group) = tail
            .strip_prefix(head.as_str())
            .and_then(|g| g.strip_prefix('{'))
        {
            for item in group
                .split([',', '}'])
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                let mut p = path.clone();
                p.extend(item.split("::").map(str::trim).map(String::from));
                out.push(p);
            }
        } else {
            out.push(path);
        }
    }
    out
}

/// The paths a file's code names through its own child modules (`journaled::apply`).
fn child_paths(
    code: &str,
    module: &[String],
    modules: &BTreeMap<Vec<String>, PathBuf>,
) -> Vec<Vec<String>> {
    let children = modules
        .keys()
        .filter(|m| m.len() == module.len() + 1 && m.starts_with(module));
    let mut out = Vec::new();
    for child in children {
        let name = format!("{}::", child[module.len()]);
        let used = code.match_indices(&name).any(|(i, _)| {
            !code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
        });
        if used {
            out.push(child.clone());
        }
    }
    out
}

/// The file a module path names: its longest prefix that is a module of src/.
fn file_of(path: &[String], modules: &BTreeMap<Vec<String>, PathBuf>) -> Option<PathBuf> {
    (1..=path.len())
        .rev()
        .find_map(|n| modules.get(&path[..n]).cloned())
}

/// The strongly connected parts of a graph with more than one file (Tarjan's, iterative enough
/// for a few hundred files).
fn circles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct T<'a> {
        g: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on: BTreeSet<&'a PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a PathBuf) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let Some((w, _)) = t.g.get_key_value(w) else {
                continue;
            };
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut part = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                part.push(w.clone());
                if w == v {
                    break;
                }
            }
            if part.len() > 1 {
                part.sort();
                t.out.push(part);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// Each file of src/ (relative), its module path, and the files its code imports.
fn import_graph() -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let rel: Vec<PathBuf> = files
        .iter()
        .map(|f| f.strip_prefix(&src).unwrap().to_path_buf())
        .filter(|r| !r.to_string_lossy().ends_with("tests.rs"))
        .collect();
    let modules: BTreeMap<Vec<String>, PathBuf> =
        rel.iter().map(|r| (module_of(r), r.clone())).collect();
    let mut graph = BTreeMap::new();
    for r in &rel {
        let text = std::fs::read_to_string(src.join(r)).unwrap();
        let module = module_of(r);
        let code = code_of(&text);
        let mut paths = named_paths(&code, &module);
        paths.extend(child_paths(&code, &module, &modules));
        // A module naming its own ancestors (`super::App`, `crate::cli::Ctx` in a command) is one
        // module split into files, not an import between modules.
        let to: BTreeSet<PathBuf> = paths
            .iter()
            .filter_map(|p| file_of(p, &modules))
            .filter(|f| f != r && !module.starts_with(&module_of(f)))
            .collect();
        graph.insert(r.clone(), to);
    }
    graph
}

/// The top-level module of a file (`board/panes/x.rs` is in `board`; `text.rs` in `text`).
fn top(f: &Path) -> String {
    let first = f.iter().next().unwrap().to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

#[test]
fn imports_point_down_only() {
    let may: BTreeMap<&str, &[&str]> = MAY_IMPORT.iter().copied().collect();
    let mut wrong = Vec::new();
    for (from, tos) in import_graph() {
        let Some(allowed) = may.get(top(&from).as_str()) else {
            continue;
        };
        for to in tos {
            let t = top(&to);
            if t != top(&from)
                && !LEAVES.contains(&t.as_str())
                && t != "lib"
                && !allowed.contains(&t.as_str())
            {
                wrong.push(format!("{} imports {}", from.display(), to.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_import_circle() {
    let crossing: Vec<String> = circles(&import_graph())
        .into_iter()
        .map(|c| {
            c.iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(" <-> ")
        })
        .collect();
    assert!(
        crossing.is_empty(),
        "import circles:\n{}",
        crossing.join("\n")
    );
}

#[test]
fn the_reader_finds_a_known_import() {
    let g = import_graph();
    let dispatch = g
        .get(Path::new("cli/dispatch.rs"))
        .expect("cli/dispatch.rs is read");
    assert!(dispatch.iter().any(|f| top(f) == "board"), "{dispatch:?}");
    let flows = g
        .get(Path::new("flows/owner.rs"))
        .expect("flows/owner.rs is read");
    assert!(flows.iter().any(|f| top(f) == "kernel"), "{flows:?}");
    // A child naming its parent is one module in two files, not an import.
    let text = g
        .get(Path::new("kernel/seal/text.rs"))
        .expect("kernel/seal/text.rs is read");
    assert!(!text.contains(Path::new("kernel/seal.rs")), "{text:?}");
}
