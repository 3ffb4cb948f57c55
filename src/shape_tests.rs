//! The shape issue 15 asked the code to keep, checked on the source itself: no function in `src/transfer` over
//! [`MAX_FN_LINES`] lines, and no cycle among the modules of `src/` (one module using another that, directly or
//! through others, uses it). A module and its own submodules may use each other (a parent re-exporting its child's
//! type, a child using its parent's): that is one unit, not a cycle.
//!
//! The reading is textual and deliberately simple: comment lines and each file's `#[cfg(test)]` module are left
//! out (as are `*_tests.rs` files); every `crate::…`, `super::…` and `self::…` path names the longest module it starts with.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest a function in `src/transfer` may be, in lines from its signature to its closing brace.
const MAX_FN_LINES: usize = 80;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`; `src/lib.rs` and `src/main.rs` are the crate root, "".
fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).expect("under src").with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The file's code, line for line: comment lines blank, and nothing from its `#[cfg(test)]` module on.
fn code_of(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut all = text.lines().peekable();
    while let Some(line) = all.next() {
        let t = line.trim();
        if t == "#[cfg(test)]" && all.peek().is_some_and(|next| next.trim_start().starts_with("mod ")) {
            break;
        }
        lines.push(if t.starts_with("//") { "" } else { line });
    }
    lines
}

/// The modules a file's code names by path, resolved to the longest module each path starts with.
fn uses(module: &[String], code: &[&str], known: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let mut found = BTreeSet::new();
    for line in code {
        for (at, _) in line.match_indices("::") {
            let head_start = line[..at].rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
            let head = &line[head_start..at];
            // Only the first segment of a path: `a::b::c` is read once, from `a`.
            if line[..head_start].ends_with("::") {
                continue;
            }
            let base: Vec<String> = match head {
                "crate" => Vec::new(),
                "self" => module.to_vec(),
                "super" => module[..module.len().saturating_sub(1)].to_vec(),
                _ => continue,
            };
            let mut path = base;
            let rest = &line[at + 2..];
            let mut segments = rest.split("::").map(|s| {
                let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
                &s[..end]
            });
            for segment in segments.by_ref() {
                if segment == "super" {
                    path.pop();
                    continue;
                }
                if segment.is_empty() {
                    break;
                }
                path.push(segment.to_string());
                if !known.contains(&path) {
                    path.pop();
                    break;
                }
            }
            if !path.is_empty() {
                found.insert(path);
            }
        }
    }
    found
}

fn is_within(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The modules that use each other: every strongly connected component of more than one module (Tarjan's
/// algorithm), each as its modules in order, `a, c`.
fn cycles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<String> {
    let mut t = Tarjan { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for module in graph.keys() {
        if !t.index.contains_key(module) {
            t.visit(module);
        }
    }
    t.found
}

struct Tarjan<'a> {
    graph: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    index: BTreeMap<&'a Vec<String>, usize>,
    low: BTreeMap<&'a Vec<String>, usize>,
    stack: Vec<&'a Vec<String>>,
    found: Vec<String>,
}

impl<'a> Tarjan<'a> {
    fn visit(&mut self, v: &'a Vec<String>) {
        let i = self.index.len();
        self.index.insert(v, i);
        self.low.insert(v, i);
        self.stack.push(v);
        for w in self.graph.get(v).into_iter().flatten() {
            let Some((w, _)) = self.graph.get_key_value(w) else { continue };
            if !self.index.contains_key(w) {
                self.visit(w);
                let low = self.low[v].min(self.low[w]);
                self.low.insert(v, low);
            } else if self.stack.contains(&w) {
                let low = self.low[v].min(self.index[w]);
                self.low.insert(v, low);
            }
        }
        if self.low[v] == self.index[v] {
            let at = self.stack.iter().rposition(|m| *m == v).expect("on the stack");
            let component: BTreeSet<String> = self.stack.drain(at..).map(|m| m.join("::")).collect();
            if component.len() > 1 {
                self.found.push(component.into_iter().collect::<Vec<_>>().join(", "));
            }
        }
    }
}

#[test]
fn no_module_of_src_uses_one_that_uses_it_back() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let known: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(f)).collect();
    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in &files {
        if file.file_name().is_some_and(|n| n.to_string_lossy().ends_with("_tests.rs")) {
            continue;
        }
        let module = module_of(file);
        let text = std::fs::read_to_string(file).expect("a source file");
        let used = uses(&module, &code_of(&text), &known);
        let edges = used.into_iter().filter(|m| !is_within(m, &module)).collect();
        graph.insert(module, edges);
    }
    let found = cycles(&graph);
    assert!(found.is_empty(), "modules that use each other:\n{}", found.join("\n"));
}

/// The lines of each function of a file, by a brace count that skips string literals and comments.
fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let lines = code_of(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        let t = t.strip_prefix("pub ").or_else(|| t.strip_prefix("pub(crate) ")).unwrap_or(t);
        let t = t.strip_prefix("pub(super) ").unwrap_or(t);
        let t = t.strip_prefix("async ").unwrap_or(t);
        let t = t.strip_prefix("const ").unwrap_or(t);
        let Some(rest) = t.strip_prefix("fn ") else {
            i += 1;
            continue;
        };
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let (mut depth, mut opened, mut j) = (0i64, false, i);
        'lines: while j < lines.len() {
            let mut in_str = false;
            let mut prev = ' ';
            for c in lines[j].chars() {
                match c {
                    '"' if prev != '\\' && prev != '\'' => in_str = !in_str,
                    '{' if !in_str => {
                        depth += 1;
                        opened = true;
                    }
                    '}' if !in_str => depth -= 1,
                    ';' if !in_str && !opened && depth == 0 => break 'lines,
                    _ => {}
                }
                prev = if prev == '\\' && c == '\\' { ' ' } else { c };
            }
            if opened && depth <= 0 {
                break;
            }
            j += 1;
        }
        if opened {
            out.push((name, i + 1, j - i + 1));
            i = j + 1;
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn no_function_in_src_transfer_is_over_80_lines() {
    let mut files = Vec::new();
    rust_files(&src().join("transfer"), &mut files);
    let mut long = Vec::new();
    for file in files.iter().filter(|f| !f.to_string_lossy().ends_with("_tests.rs")) {
        let text = std::fs::read_to_string(file).expect("a source file");
        for (name, line, length) in function_lengths(&text) {
            if length > MAX_FN_LINES {
                long.push(format!("{}:{line} {name}: {length} lines", file.display()));
            }
        }
    }
    assert!(long.is_empty(), "functions over {MAX_FN_LINES} lines:\n{}", long.join("\n"));
}

#[test]
fn the_checks_read_what_they_claim() {
    let text = "fn short() {\n    let s = \"}\";\n}\n\n/// doc\npub async fn two(\n    a: u8,\n) {\n    {\n    }\n}\n";
    let found = function_lengths(text);
    assert_eq!(found, vec![("short".into(), 1, 3), ("two".into(), 6, 6)]);

    let m = |s: &str| s.split("::").map(str::to_string).collect::<Vec<_>>();
    let known: BTreeSet<Vec<String>> = [m("a"), m("a::b"), m("c"), m("c::d")].into();
    let code = ["use crate::c::d::Thing;", "let x = super::b::f();", "// crate::a", "use std::fmt;"];
    let used = uses(&m("a::e"), &code_of(&code.join("\n")), &known);
    assert_eq!(used, [m("c::d"), m("a::b")].into());

    let graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> =
        [(m("a"), [m("c")].into()), (m("c"), [m("a")].into()), (m("a::b"), [m("c")].into())].into();
    assert_eq!(cycles(&graph), vec!["a, c".to_string()]);
}
