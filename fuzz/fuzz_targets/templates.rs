//! Template handles (docs/template-handles.md): an arbitrary namespace XML,
//! extension and base values → the built values. Nothing may panic, and a
//! construction stays within the documented bounds ("Bounds"): at most 2,048
//! values, none with a type or data over 256 KiB, no more than 4 MiB built in
//! all, and quick (the work bound is ~20 ms of a core; 2 s of the thread's
//! CPU time here allows for instrumentation; CPU time, not wall time, so that a
//! fuzzer starved by other work on the machine does not report a slow build).
//!
//! Input: `XML \0 extension \0 base values`, one a line as `TYPE data`.

#![no_main]

use handled_proto::value::HandleValue;
use handled_server::ops::resolve::fuzz_build_template;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

const MAX_VALUES: usize = handled_proto::request::MAX_VALUES;
const MAX_VALUE_BYTES: usize = handled_proto::envelope::MAX_MESSAGE_LEN;
const MAX_BUILT_BYTES: usize = 4 << 20;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\0');
    let namespace = parts.next().unwrap_or_default();
    let extension = parts.next().unwrap_or_default();
    let base: Vec<HandleValue> = parts
        .next()
        .unwrap_or_default()
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let (t, d) = line.split_once(' ').unwrap_or((line, ""));
            HandleValue::new(i as i32 + 1, t, d)
        })
        .collect();
    let started = thread_cpu_time();
    let built = fuzz_build_template(namespace, extension, &base);
    let took = thread_cpu_time().saturating_sub(started);
    assert!(took < Duration::from_secs(2), "construction took {took:?} of CPU time");
    let Ok(Some(values)) = built else { return };
    assert!(values.len() <= MAX_VALUES, "{} values", values.len());
    let mut total = 0;
    for v in &values {
        assert!(v.value_type.len() <= MAX_VALUE_BYTES && v.data.len() <= MAX_VALUE_BYTES);
        total += v.value_type.len() + v.data.len();
    }
    assert!(total <= MAX_BUILT_BYTES, "{total} bytes built");
});

/// CPU time this thread has used.
fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec to the pointer we pass.
    let done = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(done, 0, "CLOCK_THREAD_CPUTIME_ID");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}
