//! Nubo master: the wiring of the floors below it (`nubo-model`, `nubo-service`, `nubo-http`)
//! into one server and its one-shot commands. `main.rs` only parses the command line.

pub mod app; // wiring: serving and the one-shot commands
#[cfg(test)]
mod docs; // the documentation's links resolve
pub mod telemetry; // logging set-up
