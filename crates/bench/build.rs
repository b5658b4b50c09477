//! Embeds the seeds' backend projects (bench/runtimes) in the crate, so that
//! `sluice bench` builds them from the very sources it was compiled with,
//! wherever the binary runs. Build outputs and dotfiles are left out: a
//! file left in would change the runtimes' cache hashes and grow the binary.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

/// Build outputs by path below bench/runtimes (bench/runtimes/.gitignore
/// lists them too): the binary a hand-run `go build -o go-http .` leaves.
const BUILT_FILES: &[&str] = &["go-http/go-http"];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.join("../../bench/runtimes");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    files.sort();
    let mut code = String::from(
        "/// Every file of bench/runtimes: its path there, `/`-separated, and its bytes.\n\
         pub(crate) static FILES: &[(&str, &[u8])] = &[\n",
    );
    for (relative, absolute) in &files {
        let _ = writeln!(code, "    ({relative:?}, include_bytes!({absolute:?})),");
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    std::fs::write(out.join("runtime_sources.rs"), code).expect("write runtime_sources.rs");
}

fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|err| panic!("cannot read {}: {err}", dir.display()));
    for entry in entries {
        let entry = entry.expect("directory entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        let path = entry.path();
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            collect(root, &path, files);
        } else if kind.is_file() {
            let relative = path
                .strip_prefix(root)
                .expect("below the root")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            if BUILT_FILES.contains(&relative.as_str()) {
                continue;
            }
            let absolute = path
                .canonicalize()
                .expect("canonical path")
                .to_string_lossy()
                .into_owned();
            files.push((relative, absolute));
        }
    }
}
