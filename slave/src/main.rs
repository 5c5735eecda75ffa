//! Entry point of the storage node. The node itself is built in issue 6; until then the binary
//! says so and exits non-zero rather than pretending to serve.

fn main() -> std::process::ExitCode {
    eprintln!(
        "nubo-slave {} (protocol {}): the storage node is not built yet; run nubo-master alone.",
        env!("CARGO_PKG_VERSION"),
        nubo_protocol::PROTOCOL_VERSION
    );
    std::process::ExitCode::from(2)
}
