//! The git commit the server is built from, as `HANDLED_GIT_COMMIT` (for
//! `handled --version` and `/metrics`). Order: the variable set by whoever
//! builds (a packager building from a tarball), `git rev-parse`, "unknown".

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=HANDLED_GIT_COMMIT");
    let commit = std::env::var("HANDLED_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    // Rebuild when HEAD moves: HEAD itself and the branch it names (loose or packed).
    if let (Some(git_dir), Some(common)) = (git(&["rev-parse", "--git-dir"]), git(&["rev-parse", "--git-common-dir"])) {
        let (git_dir, common) = (PathBuf::from(git_dir), PathBuf::from(common));
        let mut watched = vec![git_dir.join("HEAD"), common.join("packed-refs")];
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.push(common.join(branch));
        }
        for path in watched.iter().filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    println!("cargo:rustc-env=HANDLED_GIT_COMMIT={commit}");
}
