//! `handled bench`: load generation against any Handle server (it speaks the
//! protocol, not our internals) and the figures the published benchmarks report.

pub mod cpu;
pub mod report;
pub mod run;

pub use run::{run_closed_loop, BenchConfig, KeySet};
