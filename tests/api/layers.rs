//! The house's floors, kept: every top-level module of `src/` may import only the modules on the
//! floors below its own (the layer order of `src/lib.rs`'s `# Layout`). A `crate::x` path in the
//! code (comments aside) is an import of `x`; one that climbs, or names a module this table does
//! not know, fails with the file and the line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Floor by top-level module. A module imports only modules on lower floors.
const FLOORS: &[(&str, u8)] = &[
    // Pure: types and rules, the metrics registry.
    ("domain", 1),
    ("clock", 2),
    ("metrics", 1),
    ("telemetry", 1),
    // Adapters to the world, no rules (the clock reads the system time).
    ("store", 2),
    ("bus", 2),
    ("net", 2),
    ("wire", 2),
    ("keys", 3),
    ("remote", 4),
    // Every rule, once.
    ("service", 5),
    // The fronts: the shared HTTP toolkit first, then the fronts (api shares MCP's argument types).
    ("http", 6),
    ("a2a", 7),
    ("mcp", 7),
    ("admin", 7),
    ("console", 7),
    ("oauth", 7),
    ("api", 8),
    // Loops beside the fronts (a push is rendered by the A2A front).
    ("workers", 9),
    // Wiring.
    ("config", 10),
    ("app", 11),
    ("cli", 12),
];

/// Modules whose files must never reach the store through the service.
const NO_STORE_HANDLE: &[&str] = &[
    "workers", "a2a", "mcp", "admin", "api", "console", "http", "oauth",
];

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`src/store/db.rs` → `store`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_owned();
    match first.strip_suffix(".rs") {
        Some("lib" | "main") => None,
        Some(m) => Some(m.to_owned()),
        None => Some(first),
    }
}

/// Every `crate::name` on a line that is code (not a comment), with its line number.
fn imports(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let code = match code.find("// ") {
            Some(i) => &code[..i],
            None => code,
        };
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // `$crate::` in a macro is the crate itself, as is `crate::{` (not used here).
            let macro_path = i > 0 && rest.as_bytes()[i - 1] == b'$';
            if !name.is_empty() && !macro_path {
                out.push((n + 1, name));
            }
            rest = after;
        }
    }
    out
}

#[test]
fn every_module_imports_only_the_floors_below_it() {
    let floors: BTreeMap<&str, u8> = FLOORS.iter().copied().collect();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    files.sort();
    let mut broken = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let Some(&floor) = floors.get(module.as_str()) else {
            broken.push(format!(
                "{}: module `{module}` has no floor in FLOORS",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (line, target) in imports(&text) {
            if target == module {
                continue;
            }
            match floors.get(target.as_str()) {
                Some(&to) if to < floor => {}
                Some(&to) => broken.push(format!(
                    "{}:{line}: `{module}` (floor {floor}) imports `{target}` (floor {to})",
                    file.display()
                )),
                None => broken.push(format!(
                    "{}:{line}: `{target}` has no floor in FLOORS",
                    file.display()
                )),
            }
        }
        if NO_STORE_HANDLE.contains(&module.as_str()) && text.contains(".store()") {
            broken.push(format!(
                "{}: a front or worker reaches the store through `Service::store()`",
                file.display()
            ));
        }
    }
    assert!(
        broken.is_empty(),
        "the floors are broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_layer_check_sees_an_upward_import_and_skips_comments() {
    let text = "//! crate::app in a doc\nuse crate::service::Service; // crate::cli\nlet x = $crate::domain::X;\n";
    assert_eq!(imports(text), vec![(2, "service".to_owned())]);
}

#[test]
fn every_top_level_module_of_lib_rs_has_a_floor() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let floors: Vec<&str> = FLOORS.iter().map(|(m, _)| *m).collect();
    for line in lib.lines() {
        if let Some(m) = line
            .strip_prefix("pub mod ")
            .and_then(|m| m.strip_suffix(';'))
        {
            assert!(floors.contains(&m), "`{m}` is in lib.rs but has no floor");
        }
    }
}
