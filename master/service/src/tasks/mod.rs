//! The task queue: tasks users and administrators start, and the vocabulary of running one.

pub mod queue;
pub mod run;
