//! Builds the browser app (`web/`, Svelte and TypeScript) with npm into `$OUT_DIR/web`, which
//! `http::web` embeds into the binary. `NUBO_WEB_BUILD` chooses: `auto` (the default: build,
//! and without Node.js or on failure warn and embed nothing, so `/` says the app is missing),
//! `require` (CI: a failed build fails the compile) or `skip`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the app's build reads; a change to any of them builds it again.
const INPUTS: &[&str] = &[
    "src",
    "public",
    "scripts",
    "index.html",
    "package.json",
    "package-lock.json",
    "vite.config.ts",
    "svelte.config.js",
    "tsconfig.json",
];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let web = manifest.join("../../web");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("web");
    println!("cargo:rerun-if-env-changed=NUBO_WEB_BUILD");
    // Only paths that exist: cargo runs a script again on every build while one it names is missing.
    for input in INPUTS.iter().map(|input| web.join(input)).filter(|input| input.exists()) {
        println!("cargo:rerun-if-changed={}", input.display());
    }
    std::fs::create_dir_all(&out).expect("create the web app's output folder");
    let mode = std::env::var("NUBO_WEB_BUILD").unwrap_or_else(|_| "auto".to_owned());
    if mode == "skip" || !web.join("package.json").exists() {
        return;
    }
    match build(&web, &out) {
        Ok(()) => {}
        Err(why) if mode == "require" => panic!("the web app did not build: {why}"),
        Err(why) => println!(
            "cargo:warning=the web app was not built ({why}); the master answers 503 at /. Install Node.js and npm, or set NUBO_WEB_BUILD=skip"
        ),
    }
}

/// `npm ci` when the dependencies are not installed yet, then `npm run build` into `out`.
fn build(web: &Path, out: &Path) -> Result<(), String> {
    if !web.join("node_modules/.package-lock.json").exists() {
        run(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(web))?;
    }
    run(Command::new("npm").args(["run", "build"]).env("NUBO_WEB_OUT", out).current_dir(web))
}

fn run(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    // npm's output goes to cargo's log of this script (`cargo build -vv` shows it).
    let status = command.status().map_err(|e| format!("{shown}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{shown} exited with {status}")) }
}
