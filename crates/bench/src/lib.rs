//! `handled bench`: load generation against any Handle server (it speaks the
//! protocol, not our internals) and the figures the published benchmarks report.

pub mod admin;
pub mod batched_udp;
pub mod coord;
pub mod cpu;
pub mod fsync;
pub mod html;
pub mod http;
pub mod outcome;
pub mod recorder;
pub mod report;
pub mod run;
pub mod scenario;
pub mod spec;

pub mod stats;
pub mod stub;

pub mod sweep;
pub mod target;
pub mod tls;
pub mod wire;
pub mod workload;

pub use run::{run, Model, Plan, Schedule};
pub use spec::{TargetSpec, Transport};
pub use stats::Stats;
pub use sweep::{rate_sweep, RateSweep};
pub use target::Target;
pub use workload::{FreshNames, KeySet, OpKind, Workload, MIXED_LOOP};
