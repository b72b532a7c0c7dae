//! Admin subcommands: `create`, `delete`, `add-value`, `remove-value`,
//! `modify-value`, `list` and `keygen`. They authenticate with the credentials
//! file `serve` wrote (or `--admin`/`--secret`/`--private-key`), open a DH
//! session like the Java client (unless `--no-session`) and report refusals
//! with the server's code. Exit codes: 0 done, 2 not found, 3 refused
//! (exists, invalid, not responsible...), 4 authentication or permission
//! failure, 1 usage, I/O or connection error.

use crate::credentials_file::CredentialsFile;
use crate::handle_syntax::{check_handle, check_prefix, prefix_of};
use crate::target::{unreachable, Server, Via};
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use handled_client::{AdminError, AdminSession, ClientError, ConnectParams, Credentials, KeyChoice, Protocol};
use handled_proto::header::ResponseCode;
use handled_proto::json::{value_from_json, value_to_json};
use handled_proto::value::HandleValue;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Clone)]
pub struct Connect {
    #[command(flatten)]
    server: Server,
    /// Use the HTTP tunnel (the HTTP port) instead of TCP.
    #[arg(long)]
    http: bool,
    /// Credentials file written by `handled serve` [default: data/admin-PREFIX.json of the prefix
    /// acted on, else the only data/admin-*.json, else data/admin-TEST.json; relative to the working
    /// directory: run from where `serve` ran, or give the path].
    #[arg(long, env = "HANDLED_CREDENTIALS")]
    credentials: Option<PathBuf>,
    /// Authenticate with the file's RSA key instead of its secret key.
    #[arg(long)]
    rsa: bool,
    /// Identity `INDEX:HANDLE`, instead of the credentials file (with --secret or --private-key).
    #[arg(long)]
    admin: Option<String>,
    /// Secret key of --admin.
    #[arg(long, env = "HANDLED_SECRET", hide_env_values = true)]
    secret: Option<String>,
    /// PKCS#8 DER RSA private key file of --admin (as `keygen` writes).
    #[arg(long)]
    private_key: Option<PathBuf>,
    /// Plain challenge/response for each request instead of a session.
    #[arg(long)]
    no_session: bool,
    /// Seconds to wait for each answer.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
}

/// Where to connect, and the handle a command acts on.
#[derive(Args)]
pub struct OnHandle {
    #[command(flatten)]
    connect: Connect,
    /// The handle, PREFIX/SUFFIX (e.g. TEST/doc1).
    handle: String,
}

/// The handle `create`, `add-value` and `modify-value` write to, and the
/// values they write.
#[derive(Args)]
pub struct NewValues {
    #[command(flatten)]
    on: OnHandle,
    /// Values as INDEX:TYPE:DATA, e.g. 1:URL:https://example.org.
    values: Vec<String>,
    /// Values as a JSON array in the REST API form (instead of / besides VALUES).
    #[arg(long)]
    json: Option<String>,
}

impl NewValues {
    fn parse(&self) -> anyhow::Result<Vec<HandleValue>> {
        values(&self.values, self.json.as_deref())
    }
}

#[derive(Subcommand)]
pub enum AdminCommand {
    /// Create a handle with the values given.
    ///
    /// Only those values: no HS_ADMIN value is added (hdl-admintool adds one). The prefix's
    /// administrators and the server administrators administer the handle all the same; to give it
    /// an administrator of its own, add an HS_ADMIN value with --json, e.g.
    /// '[{"index":100,"type":"HS_ADMIN","data":{"format":"admin","value":{"handle":"TEST/ADMIN","index":300,"permissions":"111111111111"}}}]'.
    Create {
        #[command(flatten)]
        values: NewValues,
        /// Replace the handle if it exists.
        #[arg(long)]
        overwrite: bool,
        /// Append a new random suffix to HANDLE (e.g. TEST/ or TEST/doc-).
        #[arg(long)]
        mint: bool,
    },
    /// Delete a handle.
    Delete {
        #[command(flatten)]
        on: OnHandle,
    },
    /// Add values (INDEX:TYPE:DATA or --json).
    AddValue {
        #[command(flatten)]
        values: NewValues,
        /// Replace values whose index is taken.
        #[arg(long)]
        overwrite: bool,
    },
    /// Remove values by index.
    RemoveValue {
        #[command(flatten)]
        on: OnHandle,
        /// Indexes of the values to remove.
        #[arg(required = true)]
        indexes: Vec<i32>,
    },
    /// Replace values by index (INDEX:TYPE:DATA or --json).
    ModifyValue {
        #[command(flatten)]
        values: NewValues,
    },
    /// List the handles under a prefix (TEST or 0.NA/TEST).
    List {
        #[command(flatten)]
        connect: Connect,
        /// The prefix, e.g. TEST (or 0.NA/TEST).
        prefix: String,
    },
}

impl AdminCommand {
    fn connect(&self) -> &Connect {
        match self {
            AdminCommand::Create { values, .. }
            | AdminCommand::AddValue { values, .. }
            | AdminCommand::ModifyValue { values } => &values.on.connect,
            AdminCommand::Delete { on } | AdminCommand::RemoveValue { on, .. } => &on.connect,
            AdminCommand::List { connect, .. } => connect,
        }
    }

    /// The handle (or prefix, for `list`) named, checked before anything is sent.
    fn check_syntax(&self) -> anyhow::Result<&str> {
        match self {
            AdminCommand::Create { values: NewValues { on, .. }, mint, .. } => {
                check_handle(&on.handle, *mint).map(|_| on.handle.as_str())
            }
            AdminCommand::Delete { on }
            | AdminCommand::AddValue { values: NewValues { on, .. }, .. }
            | AdminCommand::RemoveValue { on, .. }
            | AdminCommand::ModifyValue { values: NewValues { on, .. } } => {
                check_handle(&on.handle, false).map(|_| on.handle.as_str())
            }
            AdminCommand::List { prefix, .. } => check_prefix(prefix).map(|_| prefix.as_str()),
        }
    }
}

/// `keygen`: a new RSA key pair for an admin handle.
#[derive(Args)]
pub struct KeygenArgs {
    /// Where to write the private key (PKCS#8 DER, mode 0600).
    out: PathBuf,
    /// Index to give the HS_PUBKEY value printed for `add-value --json`.
    #[arg(long, default_value_t = 301)]
    index: i32,
    /// Replace an existing file at OUT (its private key is lost).
    #[arg(long)]
    force: bool,
}

fn parse_value(text: &str) -> anyhow::Result<HandleValue> {
    let mut parts = text.splitn(3, ':');
    let (Some(i), Some(t), Some(d)) = (parts.next(), parts.next(), parts.next()) else {
        bail!("value {text:?}: expected INDEX:TYPE:DATA");
    };
    let index: i32 = i.parse().with_context(|| format!("value {text:?}: index {i:?} is not a number"))?;
    Ok(HandleValue::new(index, t, d))
}

fn values(args: &[String], json: Option<&str>) -> anyhow::Result<Vec<HandleValue>> {
    let mut out: Vec<HandleValue> = args.iter().map(|a| parse_value(a)).collect::<anyhow::Result<_>>()?;
    if let Some(j) = json {
        let v: serde_json::Value = serde_json::from_str(j).context("--json is not JSON")?;
        let items = v.as_array().cloned().unwrap_or_else(|| vec![v]);
        for item in &items {
            out.push(value_from_json(item).map_err(|e| anyhow::anyhow!("--json: {}", e.message()))?);
        }
    }
    Ok(out)
}

impl Connect {
    /// The credentials to act with on `prefix` (None: no one prefix, as in an import).
    pub(crate) fn credentials(&self, prefix: Option<&str>) -> anyhow::Result<Credentials> {
        if let Some(admin) = &self.admin {
            let (index, handle) = admin.split_once(':').context("--admin must be INDEX:HANDLE")?;
            let index: i32 = index.parse().context("--admin index is not a number")?;
            return match (&self.secret, &self.private_key) {
                (Some(s), None) => Ok(Credentials::secret(handle.as_bytes().to_vec(), index, s.as_bytes().to_vec())),
                (None, Some(p)) => {
                    let der = std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
                    Ok(Credentials::rsa_pkcs8(handle.as_bytes().to_vec(), index, &der)?)
                }
                _ => bail!("--admin needs exactly one of --secret and --private-key"),
            };
        }
        let choice = if self.rsa { KeyChoice::PublicKey } else { KeyChoice::Secret };
        CredentialsFile::choose(self.credentials.as_deref(), prefix).load(choice, "--admin with --secret/--private-key")
    }

    fn via(&self) -> Via {
        if self.http {
            Via::Http
        } else {
            Via::Tcp
        }
    }

    pub(crate) fn params(&self) -> anyhow::Result<ConnectParams> {
        let protocol = if self.http { Protocol::Http } else { Protocol::Tcp };
        let addr = self.server.addr(self.via())?;
        let mut p = ConnectParams::new(protocol, addr);
        p.timeout = Duration::from_secs_f64(self.timeout.max(0.001));
        p.use_session = !self.no_session;
        Ok(p)
    }
}

/// Exit code for a refusal (see the module docs).
pub(crate) fn exit_for(code: ResponseCode) -> u8 {
    match code {
        ResponseCode::HANDLE_NOT_FOUND | ResponseCode::VALUES_NOT_FOUND => 2,
        c if (400..=406).contains(&c.0) => 4,
        _ => 3,
    }
}

pub async fn run(command: AdminCommand) -> anyhow::Result<ExitCode> {
    let named = command.check_syntax()?.to_string();
    let c = command.connect().clone();
    let prefix = match &command {
        AdminCommand::List { prefix, .. } => prefix.strip_prefix("0.NA/").unwrap_or(prefix),
        _ => prefix_of(&named),
    };
    let creds = c.credentials(Some(prefix))?;
    let who = creds.display();
    let params = c.params()?;
    let mut admin = match AdminSession::open(params.clone(), creds).await {
        Ok(a) => a,
        Err(AdminError::Client(e @ (ClientError::Io(_) | ClientError::Timeout(_) | ClientError::Http(_)))) => {
            return Err(unreachable(params.addr, c.via(), &e.to_string()))
        }
        Err(e) => bail!("cannot open an admin session with {} as {who}: {e}", params.addr),
    };
    let result = execute(&mut admin, command).await;
    let _ = admin.close().await;
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => match e.downcast_ref::<AdminError>().and_then(AdminError::code) {
            Some(code) => {
                let hint = match code {
                    ResponseCode::AUTHENTICATION_FAILED => format!(" (wrong key for {who}?)"),
                    ResponseCode::INVALID_ADMIN | ResponseCode::INSUFFICIENT_PERMISSIONS => {
                        format!(" ({who} lacks the permission)")
                    }
                    ResponseCode::SERVER_NOT_RESP => {
                        format!(" (prefix {} is not homed on {})", prefix_of(&named), params.addr)
                    }
                    _ => String::new(),
                };
                eprintln!("error: {e:#}{hint}");
                Ok(ExitCode::from(exit_for(code)))
            }
            None => Err(e),
        },
    }
}

async fn execute(admin: &mut AdminSession, command: AdminCommand) -> anyhow::Result<()> {
    match command {
        AdminCommand::Create { values, overwrite, mint } => {
            let created = admin.create_with(values.on.handle.as_bytes(), &values.parse()?, overwrite, mint).await?;
            println!("{}", String::from_utf8_lossy(&created));
        }
        AdminCommand::Delete { on } => admin.delete(on.handle.as_bytes()).await?,
        AdminCommand::AddValue { values, overwrite } => {
            admin.add_values(values.on.handle.as_bytes(), &non_empty(values.parse()?)?, overwrite).await?
        }
        AdminCommand::RemoveValue { on, indexes } => admin.remove_values(on.handle.as_bytes(), &indexes).await?,
        AdminCommand::ModifyValue { values } => {
            admin.modify_values(values.on.handle.as_bytes(), &non_empty(values.parse()?)?).await?
        }
        AdminCommand::List { prefix, .. } => {
            for h in admin.list_handles(prefix.as_bytes()).await? {
                println!("{}", String::from_utf8_lossy(&h));
            }
        }
    }
    Ok(())
}

fn non_empty(v: Vec<HandleValue>) -> anyhow::Result<Vec<HandleValue>> {
    if v.is_empty() {
        bail!("no values given (INDEX:TYPE:DATA or --json)");
    }
    Ok(v)
}

pub fn keygen(args: KeygenArgs) -> anyhow::Result<ExitCode> {
    if args.out.exists() && !args.force {
        bail!("{} exists: a private key there would be lost (use --force to replace it)", args.out.display());
    }
    let key = handled_server::keys::RsaSigner::generate()?;
    key.save(&args.out)?;
    let value = HandleValue::new(args.index, "HS_PUBKEY", key.hs_pubkey());
    eprintln!("private key written to {} (PKCS#8 DER; keep it secret)", args.out.display());
    eprintln!("add the public key to an admin handle with: handled add-value HANDLE --json '<the JSON below>'");
    println!("{}", serde_json::to_string(&value_to_json(&value))?);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_syntax() {
        let v = parse_value("1:URL:https://example.org/a:b").unwrap();
        assert_eq!(
            (v.index, v.value_type.as_slice(), v.data.as_slice()),
            (1, &b"URL"[..], &b"https://example.org/a:b"[..])
        );
        assert!(parse_value("URL:x").is_err());
        assert!(parse_value("x:URL:y").is_err());
        let j = values(&[], Some(r#"[{"index":2,"type":"EMAIL","data":"a@b"}]"#)).unwrap();
        assert_eq!(j[0].index, 2);
        assert_eq!(exit_for(ResponseCode::HANDLE_NOT_FOUND), 2);
        assert_eq!(exit_for(ResponseCode::AUTHENTICATION_FAILED), 4);
        assert_eq!(exit_for(ResponseCode::HANDLE_ALREADY_EXISTS), 3);
    }
}
