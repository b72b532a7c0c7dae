//! Progress bars of the long-running client commands (`import`, offline and online).

use indicatif::{ProgressState, ProgressStyle};

/// A bar with `{rate}` as a whole number per second (indicatif's `{per_sec}` shows four decimals).
pub fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).expect("static template").with_key(
        "rate",
        |state: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{:.0}/s", state.per_sec());
        },
    )
}
