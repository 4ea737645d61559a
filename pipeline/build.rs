//! Build identity for `provenance.json`: the git commit the binary was built from and
//! whether the checkout had uncommitted changes to tracked files, when built from a git
//! checkout with `git` on the PATH (otherwise both are left unset and provenance records
//! them as null). The build script reruns when a source directory of the workspace, the
//! git index or HEAD changes, so the flag follows edits anywhere in the workspace.

use std::path::Path;
use std::process::Command;

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest_dir)
        .parent()
        .expect("the pipeline crate lives in the workspace root");
    // Every workspace source entry except run outputs and build products.
    if let Ok(entries) = std::fs::read_dir(root) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || name == "target" || name == "runs" {
                continue;
            }
            println!("cargo:rerun-if-changed={}", e.path().display());
        }
    }
    let Some(commit) = git(root, &["rev-parse", "HEAD"]) else {
        return;
    };
    let head_ref = git(root, &["symbolic-ref", "-q", "HEAD"]);
    for f in ["HEAD", "index"].into_iter().chain(head_ref.as_deref()) {
        if let Some(p) = git(root, &["rev-parse", "--git-path", f]) {
            let p = if Path::new(&p).is_absolute() {
                Path::new(&p).to_path_buf()
            } else {
                root.join(p)
            };
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    let dirty =
        git(root, &["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty());
    println!("cargo:rustc-env=AGENTRACE_GIT_COMMIT={commit}");
    if let Some(d) = dirty {
        println!("cargo:rustc-env=AGENTRACE_GIT_DIRTY={d}");
    }
}
