//! `handled backup DEST`: a consistent backup of a running server, pulled over
//! HTTPS from `/api/backup` (the server owns its store file; see
//! `crates/server/src/backup/`). Written to a temporary file beside DEST, checked
//! whole (format and checksum), synced, then renamed to DEST: DEST is either the
//! complete backup or untouched. Exit codes: 0 done, 1 local error (files,
//! connection, a damaged download), 3 refused by the server (busy, a store it
//! does not back up), 4 authentication or permission denied.

use anyhow::{bail, Context};
use clap::Args;
use handled_bench::http::{HttpConn, HttpReply, HttpTarget};
use handled_bench::recorder::Recorder;
use handled_bench::spec::{TargetSpec, Transport};
use handled_client::{Credentials, KeyChoice};
use handled_store::backup::BackupReader;
use hyper::Method;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest wait for one answer (a chunk is about 1 MiB).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Sync the file being written after this many bytes.
const SYNC_EVERY: usize = 16 << 20;

#[derive(Args)]
pub struct BackupArgs {
    /// The backup file to write (mode 0600: it holds the server key and admin credentials).
    dest: PathBuf,
    /// Server host.
    #[arg(long, env = "HANDLED_HOST", default_value = "127.0.0.1")]
    host: String,
    /// The server's HTTP(S) port.
    #[arg(long, env = "HANDLED_HTTP_PORT", default_value_t = crate::target::HTTP_PORT)]
    http_port: u16,
    /// Credentials file of a server administrator (`server_admins`); its secret key is used
    /// [default: the only data/admin-*.json, else data/admin-TEST.json].
    #[arg(long, env = "HANDLED_CREDENTIALS")]
    credentials: Option<PathBuf>,
    /// Identity `INDEX:HANDLE` with --secret, instead of the credentials file.
    #[arg(long, requires = "secret")]
    admin: Option<String>,
    /// Secret key of --admin.
    #[arg(long, env = "HANDLED_SECRET", hide_env_values = true)]
    secret: Option<String>,
    /// Trust this PEM CA (or the server's own certificate) besides the public roots.
    #[arg(long)]
    ca_file: Option<PathBuf>,
    /// Accept any server certificate (the self-signed default one; only on a network you trust).
    #[arg(long)]
    insecure: bool,
    /// Plain HTTP (a server with `allow_plain_http_admin`; the secret travels in clear).
    #[arg(long)]
    plain_http: bool,
    /// Replace DEST if it exists.
    #[arg(long)]
    force: bool,
    /// Pull at most this many MiB per second: the server makes chunks only as they
    /// are pulled, so this bounds the backup's share of its CPU and disk. 0: no limit.
    #[arg(long, default_value_t = 8.0)]
    max_rate_mib: f64,
}

impl BackupArgs {
    fn credentials(&self) -> anyhow::Result<Credentials> {
        if let Some(admin) = &self.admin {
            let (index, handle) = admin.split_once(':').context("--admin must be INDEX:HANDLE")?;
            let index: i32 = index.parse().context("--admin index is not a number")?;
            let secret = self.secret.as_deref().context("--admin needs --secret")?;
            return Ok(Credentials::secret(handle.as_bytes().to_vec(), index, secret.as_bytes().to_vec()));
        }
        crate::credentials_file::CredentialsFile::choose(self.credentials.as_deref(), None)
            .load(KeyChoice::Secret, "--admin with --secret")
    }
}

/// The server's answers, one connection.
struct Client {
    target: HttpTarget,
    conn: HttpConn,
    recorder: Arc<Recorder>,
    authorization: String,
}

impl Client {
    /// Send `method /api/backup` with the credentials, naming backup `id` if given
    /// (in a header: the server refuses ids in URLs, which logs record).
    async fn send(&mut self, method: Method, id: Option<&str>) -> anyhow::Result<HttpReply> {
        let mut request = hyper::Request::builder()
            .method(method)
            .uri("/api/backup")
            .header(hyper::header::AUTHORIZATION, self.authorization.as_str());
        if let Some(id) = id {
            request = request.header("x-backup-id", id);
        }
        let sent = self.conn.send(&self.target, &self.recorder, request, bytes::Bytes::new());
        match tokio::time::timeout(REQUEST_TIMEOUT, sent).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) if e.kind.starts_with("connect") => {
                let addr = self.target.addrs.first().copied().context("no server address")?;
                Err(crate::target::unreachable(addr, crate::target::Via::Http, &e.kind))
            }
            Ok(Err(e)) => bail!("{}: {}", self.target.authority, e.kind),
            Err(_) => bail!("{}: no answer within {}s", self.target.authority, REQUEST_TIMEOUT.as_secs()),
        }
    }
}

/// The server's refusal: message and exit code.
fn refusal(reply: &HttpReply) -> (String, u8) {
    let message = serde_json::from_slice::<serde_json::Value>(&reply.body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&reply.body).chars().take(200).collect());
    let code = if matches!(reply.status, 401 | 403) { 4 } else { 3 };
    (format!("the server refused the backup (HTTP {}): {message}", reply.status), code)
}

pub async fn run(args: BackupArgs) -> anyhow::Result<ExitCode> {
    if args.dest.exists() && !args.force {
        bail!("{} exists (--force replaces it)", args.dest.display());
    }
    let credentials = args.credentials()?;
    let authorization = handled_bench::admin::basic_authorization(&credentials).map_err(anyhow::Error::msg)?;
    let mut spec = TargetSpec::new(Transport::Http, &args.host, Some(args.http_port));
    spec.insecure = args.insecure;
    spec.cacert = args.ca_file.clone();
    let target = spec.http(!args.plain_http, &args.host, args.http_port).map_err(anyhow::Error::msg)?;
    let mut client =
        Client { target, conn: HttpConn::default(), recorder: Arc::new(Recorder::new(Instant::now())), authorization };

    let started = Instant::now();
    let reply = client.send(Method::POST, None).await.map_err(|e| tls_hint(e, &args))?;
    if reply.status != 200 {
        let (message, code) = refusal(&reply);
        eprintln!("error: {message}");
        return Ok(ExitCode::from(code));
    }
    let answer: serde_json::Value = serde_json::from_slice(&reply.body).context("the server's answer is not JSON")?;
    let id = answer["id"].as_str().context("the server's answer has no backup id")?.to_owned();

    let partial = partial_path(&args.dest);
    let rate = (args.max_rate_mib > 0.0).then_some(args.max_rate_mib * (1 << 20) as f64);
    let result = download(&mut client, &id, &partial, rate).await;
    let bytes = match result {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(refused)) => {
            let _ = std::fs::remove_file(&partial);
            let (message, code) = refusal(&refused);
            eprintln!("error: {message}");
            return Ok(ExitCode::from(code));
        }
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            // Free the server's backup slot now rather than after its idle time.
            let _ = client.send(Method::DELETE, Some(&id)).await;
            return Err(e.context(format!("backup not written to {}", args.dest.display())));
        }
    };
    let totals = match check(&partial) {
        Ok(t) => t,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e.context("the downloaded backup does not check out; nothing written"));
        }
    };
    std::fs::rename(&partial, &args.dest)
        .with_context(|| format!("cannot rename {} to {}", partial.display(), args.dest.display()))?;
    sync_dir(&args.dest)?;
    eprintln!(
        "backup written to {}: {} handles, {} store entries, {} files, {:.1} MiB in {:.1}s",
        args.dest.display(),
        answer["manifest"]["handles"],
        totals.entries,
        totals.files,
        bytes as f64 / (1 << 20) as f64,
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// Pull every chunk into `partial` (created new, mode 0600), at most `rate`
/// bytes per second, and sync it: the bytes written, or the server's refusal.
async fn download(
    client: &mut Client,
    id: &str,
    partial: &Path,
    rate: Option<f64>,
) -> anyhow::Result<Result<u64, HttpReply>> {
    let mut file = open_private(partial)?;
    let (mut bytes, mut unsynced) = (0u64, 0usize);
    let started = Instant::now();
    loop {
        if let Some(rate) = rate {
            let due = started + Duration::from_secs_f64(bytes as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
        }
        let reply = client.send(Method::GET, Some(id)).await?;
        if reply.status != 200 {
            return Ok(Err(reply));
        }
        file.write_all(&reply.body).with_context(|| format!("cannot write {}", partial.display()))?;
        bytes += reply.body.len() as u64;
        // Written back as it goes, not all at once at the end (one huge sync
        // would hold up the server's own log syncs on the same disk).
        unsynced += reply.body.len();
        if unsynced >= SYNC_EVERY {
            file.sync_data().with_context(|| format!("cannot sync {}", partial.display()))?;
            unsynced = 0;
        }
        if is_last(&reply) {
            break;
        }
        if reply.body.is_empty() {
            bail!("the server sent an empty chunk before the end of the backup");
        }
    }
    file.sync_all().with_context(|| format!("cannot sync {}", partial.display()))?;
    Ok(Ok(bytes))
}

fn is_last(reply: &HttpReply) -> bool {
    reply.headers.get("x-backup-last").is_some_and(|v| v == "true")
}

/// Read the whole backup: format, every frame, checksum.
fn check(path: &Path) -> anyhow::Result<handled_store::backup::BackupTotals> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut reader = BackupReader::new(std::io::BufReader::new(file))?;
    while reader.next_item()?.is_some() {}
    reader.totals().context("backup incomplete")
}

fn partial_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".partial-{}", std::process::id()));
    dest.with_file_name(name)
}

pub(crate) fn open_private(path: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))
}

/// Make a rename or a new file in `path`'s directory durable.
pub(crate) fn sync_dir(path: &Path) -> anyhow::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("cannot sync {}", dir.display()))
}

fn tls_hint(e: anyhow::Error, args: &BackupArgs) -> anyhow::Error {
    if !args.plain_http && !args.insecure && e.to_string().contains("tls") {
        e.context(
            "HTTPS failed: a server with its self-signed certificate needs --ca-file (its certificate) or --insecure",
        )
    } else {
        e
    }
}
