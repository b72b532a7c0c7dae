//! `handled resolve HANDLE`: print a handle's values, or the error code.

use crate::handle_syntax::{check_handle, prefix_of};
use crate::target::{unreachable, Server, Via};
use anyhow::Context;
use clap::Args;
use handled_client::certify::{site_key, verify_signature};
use handled_client::{resolved_values, ClientError, Connection, Protocol, ResolveOptions};
use handled_proto::header::ResponseCode;
use handled_proto::json::value_to_json;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct ResolveArgs {
    /// The handle, e.g. TEST/1.
    handle: String,
    #[command(flatten)]
    server: Server,
    /// Over UDP (the default).
    #[arg(long, conflicts_with_all = ["tcp", "http"])]
    udp: bool,
    /// Over TCP.
    #[arg(long, conflicts_with = "http")]
    tcp: bool,
    /// Over the HTTP tunnel (POST of the native message to the HTTP port).
    #[arg(long)]
    http: bool,
    /// Only values with these indexes (repeatable).
    #[arg(long = "index")]
    indexes: Vec<i32>,
    /// Only values of these types (repeatable; `URL.` matches the family).
    #[arg(long = "type")]
    types: Vec<String>,
    /// Ask the server to sign the response and check the signature with the
    /// key in the server's site record (exit 1 when it does not verify).
    #[arg(long)]
    certify: bool,
    /// Seconds to wait for an answer.
    #[arg(long, default_value_t = 5.0)]
    timeout: f64,
}

pub async fn run(args: ResolveArgs) -> anyhow::Result<ExitCode> {
    check_handle(&args.handle, false)?;
    let (protocol, via) = if args.tcp {
        (Protocol::Tcp, Via::Tcp)
    } else if args.http {
        (Protocol::Http, Via::Http)
    } else {
        (Protocol::Udp, Via::Udp)
    };
    let addr = args.server.addr(via)?;
    let timeout = Duration::from_secs_f64(args.timeout.max(0.001));
    // Out of reach shows at the connection (TCP, HTTP) or at the first answer (UDP).
    let reach = |e: ClientError| match e {
        ClientError::Io(_) | ClientError::Timeout(_) | ClientError::Http(_) => unreachable(addr, via, &e.to_string()),
        other => anyhow::Error::new(other),
    };
    let mut conn = Connection::open(protocol, addr, timeout, false).await.map_err(reach)?;
    let options = ResolveOptions {
        indexes: args.indexes,
        types: args.types.into_iter().map(String::into_bytes).collect(),
        certify: args.certify,
        ..ResolveOptions::default()
    };
    // The site record first, over the same connection: its key checks the signature.
    let site_key = match args.certify {
        true => Some(
            site_key(&conn.site_info().await.map_err(reach)?)
                .context("the server's site record carries no public key")?,
        ),
        false => None,
    };
    let response = conn.resolve(args.handle.as_bytes(), &options).await.map_err(reach)?;
    let signature = match &site_key {
        Some(key) => match verify_signature(&response, key) {
            Ok(algorithm) => {
                eprintln!("signature verified with the site key of {addr} ({algorithm})");
                Some(serde_json::json!({ "algorithm": algorithm, "verified": true }))
            }
            Err(e) => anyhow::bail!("certified response from {addr} rejected: {e}"),
        },
        None => None,
    };
    match resolved_values(&response) {
        Some(values) => {
            let json: Vec<_> = values.iter().map(value_to_json).collect();
            let mut out = serde_json::json!({ "handle": args.handle, "values": json });
            if let Some(signature) = signature {
                out["signature"] = signature;
            }
            println!("{}", serde_json::to_string_pretty(&out)?);
            Ok(ExitCode::SUCCESS)
        }
        None => {
            let code = response.code();
            let hint = if code == ResponseCode::SERVER_NOT_RESP {
                format!(" (prefix {} is not homed on {addr})", prefix_of(&args.handle))
            } else {
                String::new()
            };
            eprintln!(
                "{}: {} ({}){}{hint}",
                args.handle,
                code.name(),
                code.0,
                response.message().map(|m| format!(": {m}")).unwrap_or_default()
            );
            Ok(ExitCode::from(if code == ResponseCode::HANDLE_NOT_FOUND { 2 } else { 3 }))
        }
    }
}
