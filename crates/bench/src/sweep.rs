//! The httperf/autobench method: at each demanded rate, new connections are
//! opened on a fixed schedule (rate / K per second), each carrying K requests
//! one after another; the figures are the *effective* reply rate against the
//! *solicited* one. A connection that errs is abandoned, as httperf does.

use crate::recorder::Outcome;
use crate::run::{Harness, Plan};
use crate::stats::Stats;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct RateSweep {
    pub from: f64,
    pub to: f64,
    pub step: f64,
    /// Requests per connection (httperf --num-calls).
    pub per_connection: u64,
    /// How long connections are launched at each rate.
    pub step_duration: Duration,
    /// Connections open at once before new ones count as `client-limit` errors
    /// (httperf's fd-unavail).
    pub max_open: usize,
}

impl RateSweep {
    pub fn rates(&self) -> Vec<f64> {
        let mut out = Vec::new();
        let mut r = self.from;
        while r <= self.to + 1e-9 && self.step > 0.0 {
            out.push(r);
            r += self.step;
        }
        out
    }
}

pub async fn rate_sweep(plan: &Plan, sweep: &RateSweep) -> Result<Vec<Stats>, String> {
    crate::run::check_supported(plan)?;
    plan.workload.client()?; // validate the key set once
    let mut out = Vec::new();
    for rate in sweep.rates() {
        out.push(one_rate(plan, sweep, rate).await?);
    }
    Ok(out)
}

async fn one_rate(plan: &Plan, sweep: &RateSweep, rate: f64) -> Result<Stats, String> {
    let mut p = plan.clone();
    p.label = format!("{} {rate:.0}/s", plan.label);
    let k = sweep.per_connection.max(1);
    let conn_rate = rate / k as f64;
    let start = Instant::now();
    let harness = Harness::start(&p, start, None);
    let open = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    let mut launched = 0u64;
    loop {
        let due = start + Duration::from_secs_f64(launched as f64 / conn_rate);
        if due >= start + sweep.step_duration {
            break;
        }
        tokio::time::sleep_until(due.into()).await;
        launched += 1;
        if open.load(Ordering::Relaxed) >= sweep.max_open {
            let now = Instant::now();
            harness.recorder.record(0, None, now, now, now, &Outcome::Failed { kind: "client-limit".into() });
            continue;
        }
        open.fetch_add(1, Ordering::Relaxed);
        let (target, recorder, open, timeout) = (p.target.clone(), harness.recorder.clone(), open.clone(), p.timeout);
        let mut client = p.workload.client()?;
        let worker = launched as usize;
        tasks.push(tokio::spawn(async move {
            let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::from_rng(&mut rand::rng());
            let mut conn = target.conn();
            let mut completed = true;
            for _ in 0..k {
                let op = client.next(&mut rng);
                let t0 = Instant::now();
                let outcome = target.call(&mut conn, &op, &recorder, timeout).await;
                recorder.record(worker, Some(op.name()), t0, t0, Instant::now(), &outcome);
                if matches!(outcome, Outcome::Failed { .. }) {
                    completed = false;
                    break;
                }
            }
            target.close(conn, &recorder);
            open.fetch_sub(1, Ordering::Relaxed);
            completed
        }));
        // Reap finished connections so the task list stays short.
        if tasks.len() > 4096 {
            let (done, pending): (Vec<_>, Vec<_>) = tasks.into_iter().partition(|t| t.is_finished());
            tasks = pending;
            for t in done {
                let _ = t.await;
            }
        }
    }
    let mut sessions = 0;
    for t in tasks {
        if t.await.map_err(|e| format!("connection task: {e}"))? {
            sessions += 1;
        }
    }
    let mut stats = harness.finish(&p, sweep.max_open).await;
    stats.solicited_rate = Some(rate);
    stats.sessions = sessions;
    Ok(stats)
}

/// Reply-rate samples per second (httperf samples every 5 s; our runs are shorter).
pub fn reply_rate_samples(stats: &Stats) -> Vec<f64> {
    stats
        .series
        .chunks(10)
        .filter(|c| c.len() == 10)
        .map(|c| c.iter().map(|b| (b.ok + b.errors) as f64).sum::<f64>())
        .collect()
}

/// (min, mean, max, standard deviation) of the reply-rate samples.
pub fn reply_rate_summary(stats: &Stats) -> (f64, f64, f64, f64) {
    let s = reply_rate_samples(stats);
    if s.is_empty() {
        let t = stats.throughput();
        return (t, t, t, 0.0);
    }
    let n = s.len() as f64;
    let mean = s.iter().sum::<f64>() / n;
    let var = s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    let min = s.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = s.iter().cloned().fold(0.0, f64::max);
    (min, mean, max, var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Bucket;

    #[test]
    fn rates_include_both_ends() {
        let s = RateSweep {
            from: 100.0,
            to: 500.0,
            step: 200.0,
            per_connection: 10,
            step_duration: Duration::from_secs(1),
            max_open: 10,
        };
        assert_eq!(s.rates(), vec![100.0, 300.0, 500.0]);
    }

    #[test]
    fn reply_rate_uses_whole_seconds() {
        let mut st = Stats::empty("x");
        st.series = vec![Bucket { ok: 10, ..Default::default() }; 25];
        st.series[12].ok = 20;
        let (min, avg, max, sd) = reply_rate_summary(&st);
        assert_eq!((min, max), (100.0, 110.0));
        assert!((avg - 105.0).abs() < 1e-9 && (sd - 5.0).abs() < 1e-9);
    }
}
