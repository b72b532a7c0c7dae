//! `handled bench scenario NAME`: named reproductions of the published methods,
//! at a size that fits a 2-core box, each printing its table in the layout of
//! the original report and building an HTML report. Without `--host` a scenario
//! starts its own `handled serve --ephemeral` (and measures its CPU).

mod creates;
mod env;
mod loops;
mod sweeps;

use env::Ctx;
pub use env::{wrk2_block, ScenarioEnv, ScenarioOutput, Server};

pub struct ScenarioInfo {
    pub name: &'static str,
    pub about: &'static str,
}

pub const SCENARIOS: &[ScenarioInfo] = &[
    ScenarioInfo { name: "cnri", about: "CNRI closed loop: 200 threads × N requests × 10 ms pause over UDP, TCP and the HTTP tunnel" },
    ScenarioInfo { name: "autobench", about: "autobench/httperf rate sweep on the HTTP tunnel, 10 requests per connection: effective vs solicited rate" },
    ScenarioInfo { name: "keepalive", about: "100,000 messages with keep-alive vs Connection: close (HTTP) and persistent vs per-request (TCP): socket counts" },
    ScenarioInfo { name: "green-flag", about: "3 bench processes released together by a coordinator, histograms merged" },
    ScenarioInfo { name: "failover", about: "two servers, the primary killed mid-run: recovery time from first failure to the first clean second" },
    ScenarioInfo { name: "registry-get", about: "domain-registry style GET rate sweep, 10 requests per connection, against any URL template (--url)" },
    ScenarioInfo { name: "concurrency", about: "closed-loop UDP at 1, 2, 4 ... 32 clients: throughput/latency curves" },
    ScenarioInfo { name: "open-loop", about: "wrk2 method: fixed request rates, latency from intended start (corrected) and from send (uncorrected)" },
    ScenarioInfo { name: "surge", about: "open-loop ramp up, hold, ramp down beyond capacity (admission control)" },
    ScenarioInfo {
        name: "durable-creates",
        about: "authenticated creates in a session per client over TCP and the HTTP tunnel, 1/16/64/128 clients, on a real data directory, disk fsync rate beside",
    },
];

pub async fn run(name: &str, env: &ScenarioEnv) -> Result<ScenarioOutput, String> {
    let mut out = run_scenario(name, env).await?;
    let target = match &env.host {
        Some(host) => format!("{host}, native port {}, HTTP port {}", env.port, env.http_port),
        None => "servers the scenario started itself (handled serve, loopback, OS-chosen ports)".into(),
    };
    out.report.meta.push(("Target".into(), target));
    Ok(out)
}

async fn run_scenario(name: &str, env: &ScenarioEnv) -> Result<ScenarioOutput, String> {
    match name {
        "cnri" => loops::cnri(&Ctx::new(env)?).await,
        "keepalive" => loops::keepalive(&Ctx::new(env)?).await,
        "concurrency" => loops::concurrency(&Ctx::new(env)?).await,
        "open-loop" => loops::open_loop(&Ctx::new(env)?).await,
        "surge" => loops::surge(&Ctx::new(env)?).await,
        "autobench" => sweeps::autobench(&Ctx::new(env)?).await,
        "registry-get" => sweeps::registry_get(&Ctx::new(env)?).await,
        "failover" => sweeps::failover(env).await,
        "green-flag" => sweeps::green_flag(&Ctx::new(env)?).await,
        "durable-creates" => creates::durable_creates(env).await,
        other => Err(format!("unknown scenario {other:?}; see `handled bench scenario --list`")),
    }
}
