//! Empty: a build script makes cargo count the build dependencies of the manifest.
fn main() {}
