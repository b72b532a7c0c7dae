//! `handled import-config` on a real Handle.Net 9.0.0 server directory
//! (tests/fixtures/handle-net-server, made by the original's setup; see its README).

mod common;

use handled_client::{certify, Connection, Protocol};
use handled_proto::data::PublicKey;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const SERVER_PASSPHRASE: &str = "server pass";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/handle-net-server")
}

/// A copy of the fixture directory to change.
fn fixture_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

fn import(server_dir: &Path, out: &Path, passphrase: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_handled"));
    command.arg("import-config").arg(server_dir).arg("--out").arg(out).env_remove("HANDLED_KEY_PASSPHRASE");
    if let Some(p) = passphrase {
        command.env("HANDLED_KEY_PASSPHRASE", p);
    }
    command.stdin(std::process::Stdio::null()).output().expect("run handled")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converts_the_directory_and_serves_with_the_imported_site_key() {
    let out = tempfile::tempdir().unwrap();
    let run = import(&fixture(), out.path(), Some(SERVER_PASSPHRASE));
    let stdout = text(&run.stdout);
    assert!(run.status.success(), "{}{}", stdout, text(&run.stderr));
    let toml = std::fs::read_to_string(out.path().join("handled.toml")).unwrap();
    for line in [
        "listen = \"127.0.0.1\"",
        "port = 2641",
        "http_port = 8000",
        "server_admins = [\"300:TEST/ADMIN\", \"301:TEST/ADMIN\"]",
        "prefixes = [\"TEST\"]",
        "case_sensitive = false",
        "max_session_secs = 86400",
        "description = \"hs-peer benchmark server (loopback only)\"",
        "server_key_file = ",
    ] {
        assert!(toml.lines().any(|l| l.starts_with(line)), "{line} missing in\n{toml}");
    }
    assert!(toml.contains("replication_admins = [\"300:TEST/ADMIN\", \"301:TEST/ADMIN\"]"), "{toml}");
    assert!(toml.contains("templates.namespace_override = true  # server_config.template_ns_override"), "{toml}");
    assert!(toml.contains("resolver.allow_recursion = false  # server_config.allow_recursion"), "{toml}");
    // Every key not carried over is named with a reason.
    for key in ["allow_na_admins", "num_threads", "log_save_config", "contactdata.dct"] {
        assert!(stdout.lines().any(|l| l.contains(key) && l.contains(": ")), "{key} not explained in\n{stdout}");
    }
    assert!(out.path().join("admin_key.pk8").exists());

    // The written configuration runs (on free loopback ports) and publishes the imported key.
    let server = common::start_with(&toml);
    let mut conn = Connection::open(Protocol::Tcp, server.tcp, Duration::from_secs(5), false).await.unwrap();
    let site = conn.site_info().await.unwrap();
    let published = certify::site_key(&site).expect("a site key");
    let imported = PublicKey::decode_data(&std::fs::read(fixture().join("pubkey.bin")).unwrap()).unwrap();
    assert_eq!(published, imported, "the site key is Handle.Net's pubkey.bin");
}

#[test]
fn encrypted_server_key_needs_the_right_passphrase() {
    let out = tempfile::tempdir().unwrap();
    let wrong = import(&fixture(), out.path(), Some("wrong pass"));
    let stderr = text(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("privkey.bin") && stderr.contains("wrong passphrase"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!out.path().join("handled.toml").exists(), "nothing half-written");

    let none = import(&fixture(), out.path(), None);
    let stderr = text(&none.stderr);
    assert_eq!(none.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--passphrase-file"), "{stderr}");
}

/// Import the fixture with `from` replaced by `to` in config.dct, which must
/// fail: (the line `to` is on, stderr).
fn import_broken(from: &str, to: &str) -> (usize, String) {
    let dir = fixture_copy();
    let path = dir.path().join("config.dct");
    let broken = std::fs::read_to_string(&path).unwrap().replacen(from, to, 1);
    let first = to.lines().next().unwrap_or(to);
    let line = broken.lines().position(|l| l.contains(first)).unwrap() + 1;
    std::fs::write(&path, broken).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = import(dir.path(), out.path(), Some(SERVER_PASSPHRASE));
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    (line, stderr)
}

#[test]
fn a_broken_config_dct_names_its_line() {
    let (line, stderr) = import_broken("\"bind_port\" = \"2641\"", "\"bind_port\" \"2641\"");
    assert!(stderr.contains(&format!("config.dct: line {line}, column")), "{stderr}");
    assert!(stderr.contains("expected `=`"), "{stderr}");
}

#[test]
fn a_mirror_directory_brings_its_source_and_identity() {
    let dir = fixture_copy();
    let path = dir.path().join("config.dct");
    let dct = std::fs::read_to_string(&path).unwrap().replacen(
        "\"server_config\" = {",
        "\"server_config\" = {\n    \"replication_authentication\" = \"privatekey:300:TEST/ADMIN\"\n    \"replication_interval\" = \"5000\"",
        1,
    );
    std::fs::write(&path, dct).unwrap();
    std::fs::copy(dir.path().join("admpriv.bin"), dir.path().join("replpriv.bin")).unwrap();
    std::fs::copy(dir.path().join("siteinfo.json"), dir.path().join("txnsrcsv.json")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = import(dir.path(), out.path(), Some(SERVER_PASSPHRASE));
    assert!(run.status.success(), "{}", text(&run.stderr));
    let toml = std::fs::read_to_string(out.path().join("handled.toml")).unwrap();
    let key = out.path().join("replication_key.pk8");
    let source = out.path().join("replication-source-siteinfo.json");
    for line in [
        "replication_authentication = \"privatekey:300:TEST/ADMIN\"".to_string(),
        "replication_interval_ms = 5000".to_string(),
        format!("replication_private_key = \"{}\"", key.display()),
        format!("replication_source = \"{}\"", source.display()),
    ] {
        assert!(toml.contains(&line), "{line} missing in\n{toml}");
    }
    assert!(key.exists() && source.exists());
}

#[test]
fn a_dsa_server_key_is_explained_not_converted() {
    let dir = fixture_copy();
    let dsa = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/tests/fixtures/handle-net-keys/dsa_privkey.bin");
    std::fs::copy(dsa, dir.path().join("privkey.bin")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = import(dir.path(), out.path(), None);
    let stdout = text(&run.stdout);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert!(stdout.contains("privkey.bin: WARNING: a DSA server key: handled signs with RSA only"), "{stdout}");
    assert!(text(&run.stderr).contains("warning: privkey.bin: a DSA server key"), "{}", text(&run.stderr));
    let toml = std::fs::read_to_string(out.path().join("handled.toml")).unwrap();
    assert!(!toml.contains("server_key_file"), "{toml}");
}

/// Issue 44, 5: without privkey.bin the first start made a new key (a new site
/// record under the clients) after an import that said nothing.
#[test]
fn a_missing_server_key_is_a_warning() {
    let dir = fixture_copy();
    std::fs::remove_file(dir.path().join("privkey.bin")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = import(dir.path(), out.path(), Some(SERVER_PASSPHRASE));
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "{stderr}");
    assert!(stdout.contains("privkey.bin: WARNING: not there: handled makes a new RSA key"), "{stdout}");
    assert!(stderr.contains("warning: privkey.bin: not there") && stderr.contains("new site record"), "{stderr}");
}

/// Issue 44, 5: on SQL handled keeps no transaction log unless asked, so
/// `txnlog_num_days_to_keep` is explained, not carried.
#[test]
fn txnlog_days_on_sql_are_explained_not_carried() {
    let dir = fixture_copy();
    let path = dir.path().join("config.dct");
    let with_days = |storage: &str| {
        std::fs::read_to_string(fixture().join("config.dct")).unwrap().replacen(
            "\"server_config\" = {",
            &format!("\"server_config\" = {{\n    {storage}\"txnlog_num_days_to_keep\" = \"4\""),
            1,
        )
    };
    std::fs::write(&path, with_days("\"storage_type\" = \"sql\"\n    ")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = import(dir.path(), out.path(), Some(SERVER_PASSPHRASE));
    let stdout = text(&run.stdout);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let toml = std::fs::read_to_string(out.path().join("handled.toml")).unwrap();
    assert!(!toml.contains("txnlog_num_days_to_keep"), "{toml}");
    assert!(stdout.lines().any(|l| l.contains("txnlog_num_days_to_keep") && l.contains("replication_log")), "{stdout}");

    // Beside its own store it is carried as before.
    std::fs::write(&path, with_days("")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = import(dir.path(), out.path(), Some(SERVER_PASSPHRASE));
    assert!(run.status.success(), "{}", text(&run.stderr));
    let toml = std::fs::read_to_string(out.path().join("handled.toml")).unwrap();
    assert!(toml.contains("txnlog_num_days_to_keep = 4"), "{toml}");
}

/// Issue 44, 4: a DSpace installation's config.dct (its handles in DSpace's
/// own table through the HandlePlugin) made a configuration for an empty
/// built-in store and exited 0. It stops, writes nothing, and says where to
/// start: the SQL view example and docs/migrating.md.
#[test]
fn a_dspace_installation_stops_with_the_way_to_serve_its_table() {
    let dir = fixture_copy();
    let dspace = std::fs::read_to_string(fixture().join("config.dct")).unwrap().replacen(
        "\"server_config\" = {",
        "\"server_config\" = {\n    \"storage_type\" = \"CUSTOM\"\n    \"storage_class\" = \"org.dspace.handle.HandlePlugin\"",
        1,
    );
    std::fs::write(dir.path().join("config.dct"), dspace).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = import(dir.path(), out.path(), Some(SERVER_PASSPHRASE));
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("HandlePlugin") && stderr.contains("docs/sql-dspace-example.toml"), "{stderr}");
    assert!(stderr.contains("docs/migrating.md"), "{stderr}");
    assert!(!out.path().join("handled.toml").exists(), "no configuration for an empty store");
    assert!(!out.path().join("server_key.pk8").exists());
}

/// Issue 44, 18: an unterminated string is reported where it started, not
/// lines later where the parser first stumbled.
#[test]
fn an_unterminated_string_is_reported_where_it_starts() {
    let (line, stderr) = import_broken("\"bind_port\" = \"2641\"", "\"bind_port\" = \"2641\n");
    assert!(stderr.contains(&format!("config.dct: line {line}, column")), "{stderr}");
    assert!(stderr.contains("a missing closing `\"`?"), "{stderr}");
}

#[test]
fn mirror_flag_pulls_from_the_imported_server_as_the_admin_identity() {
    let out = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_handled"));
    command.arg("import-config").arg(fixture()).arg("--out").arg(out.path()).arg("--mirror");
    let run = command.env("HANDLED_KEY_PASSPHRASE", SERVER_PASSPHRASE).output().unwrap();
    assert!(run.status.success(), "{}", text(&run.stderr));
    let toml = std::fs::read_to_string(out.path().join("handled.toml")).unwrap();
    let source = out.path().join("replication-source-siteinfo.json");
    for line in [
        format!("replication_source = \"{}\"", source.display()),
        "replication_authentication = \"privatekey:300:TEST/ADMIN\"".to_string(),
        format!("replication_private_key = \"{}\"", out.path().join("admin_key.pk8").display()),
    ] {
        assert!(toml.lines().any(|l| l.starts_with(&line)), "{line} missing in\n{toml}");
    }
    assert_eq!(std::fs::read(source).unwrap(), std::fs::read(fixture().join("siteinfo.json")).unwrap());
}

/// Issue 25 R5: a replication identity in config.dct holding a newline and
/// TOML (the first replication_admins entry went unescaped into a comment
/// line) does not become configuration: refused, nothing written; a newline
/// in a server admin stays inside its string.
#[test]
fn toml_in_config_dct_values_never_becomes_configuration() {
    let dir = fixture_copy();
    let dct = dir.path().join("config.dct");
    let injected = "300:TEST/ADMIN\nallow_plain_http_admin = true\n#";
    let original = std::fs::read_to_string(&dct).unwrap();
    let evil = original.replacen(
        "\"replication_admins\" = (\n      \"300:TEST/ADMIN\"",
        &format!("\"replication_admins\" = (\n      \"{injected}\""),
        1,
    );
    assert_ne!(evil, original, "the fixture's replication_admins moved");
    std::fs::write(&dct, &evil).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_handled"));
    command.arg("import-config").arg(dir.path()).arg("--out").arg(out.path()).arg("--mirror");
    let run =
        command.env("HANDLED_KEY_PASSPHRASE", SERVER_PASSPHRASE).stdin(std::process::Stdio::null()).output().unwrap();
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    assert!(text(&run.stderr).contains("not index:handle"), "{}", text(&run.stderr));
    assert!(!out.path().join("handled.toml").exists());

    // Without --mirror the same list is a value, written as one TOML string.
    let out = tempfile::tempdir().unwrap();
    let run = import(dir.path(), out.path(), Some(SERVER_PASSPHRASE));
    assert!(run.status.success(), "{}", text(&run.stderr));
    let toml = std::fs::read_to_string(out.path().join("handled.toml")).unwrap();
    let parsed: toml::Table = toml.parse().unwrap();
    assert!(!parsed.contains_key("allow_plain_http_admin"), "{toml}");
}

/// The status handle's keys (Manual §5) carry over: `status_handle_admins`
/// as a list, `enable_monitor_daemon` as a boolean.
#[test]
fn status_handle_keys_carry_over() {
    let dir = fixture_copy();
    let dct = dir.path().join("config.dct");
    let original = std::fs::read_to_string(&dct).unwrap();
    let keys = "\"server_config\" = {\n    \"enable_monitor_daemon\" = \"yes\"\n    \"status_handle_admins\" = (\n      \"300:TEST/WATCHER\"\n    )\n";
    let changed = original.replacen("\"server_config\" = {\n", keys, 1);
    assert_ne!(changed, original, "the fixture has no server_config");
    std::fs::write(&dct, changed).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = import(dir.path(), out.path(), Some(SERVER_PASSPHRASE));
    assert!(run.status.success(), "{}", text(&run.stderr));
    let parsed: toml::Table = std::fs::read_to_string(out.path().join("handled.toml")).unwrap().parse().unwrap();
    assert_eq!(parsed["enable_monitor_daemon"].as_bool(), Some(true));
    assert_eq!(parsed["status_handle_admins"].as_array().unwrap()[0].as_str(), Some("300:TEST/WATCHER"));
}

/// Handle.Net on SQL (`storage_type = "sql"`, §8.1.1): the same database in
/// `[sql]`, the JDBC URL as the driver's, the password in an owner-only file
/// and never in handled.toml, custom statements under their names, and a
/// line for each setting not carried.
#[test]
fn sql_settings_become_the_sql_table() {
    let dir = fixture_copy();
    let path = dir.path().join("config.dct");
    let get = "select 1, 'URL', concat('https://repo.example.org/handle/', handle), 0, 86400, 0, '', true, false, \
               true, false from handle where handle = ?";
    let dct = std::fs::read_to_string(&path).unwrap().replacen(
        "\"server_config\" = {",
        &format!(
            "\"server_config\" = {{\n    \"storage_type\" = \"sql\"\n    \"sql_settings\" = {{\n      \
             \"sql_url\" = \"jdbc:mariadb://db.example:3306/handlesystem?useSSL=true\"\n      \
             \"sql_driver\" = \"org.mariadb.jdbc.Driver\"\n      \"sql_login\" = \"handleserver\"\n      \
             \"sql_passwd\" = \"pg secret\"\n      \"sql_read_only\" = \"yes\"\n      \
             \"get_handle_stmt\" = \"{get}\"\n      \"trace_sql\" = \"yes\"\n      \
             \"store_handle_as_string\" = \"yes\"\n      \"store_na_as_string\" = \"no\"\n      \
             \"store_handle_value_type_as_string\" = \"yes\"\n    }}"
        ),
        1,
    );
    std::fs::write(&path, dct).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = import(dir.path(), out.path(), Some(SERVER_PASSPHRASE));
    let stdout = text(&run.stdout);
    assert!(run.status.success(), "{stdout}{}", text(&run.stderr));
    let toml = std::fs::read_to_string(out.path().join("handled.toml")).unwrap();
    for line in [
        "store = \"sql\"",
        "sql.url = \"mariadb://handleserver@db.example:3306/handlesystem\"",
        "sql.read_only = true",
        &format!("sql.get_handle_stmt = \"{get}\""),
        "sql.store_handle_as_string = true",
        "sql.store_na_as_string = false",
        "sql.store_handle_value_type_as_string = true",
    ] {
        assert!(toml.lines().any(|l| l.starts_with(line)), "{line} missing in\n{toml}");
    }
    assert!(!toml.contains("pg secret") && !stdout.contains("pg secret"), "the password written out:\n{toml}");
    let password = out.path().join("sql-password");
    assert_eq!(std::fs::read_to_string(&password).unwrap(), "pg secret");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&password).unwrap().permissions().mode() & 0o077, 0, "owner-only");
    assert!(toml.contains(&format!("sql.password_file = \"{}\"", password.display())), "{toml}");
    for (key, why) in [("sql_driver", "implied"), ("trace_sql", "HANDLED_LOG"), ("sql_url", "useSSL")] {
        assert!(stdout.lines().any(|l| l.contains(key) && l.contains(why)), "{key} not explained in\n{stdout}");
    }
    // The server reads what was written, as it would start from it.
    let config = handled_server::config::Config::load(Some(&out.path().join("handled.toml"))).unwrap();
    let options = config.storage.sql.options().unwrap();
    assert_eq!(options.password.as_deref(), Some("pg secret"));
    assert_eq!(options.statements.len(), 1);
    let layout = options.layout;
    assert!(layout.store_handle_as_string && !layout.store_na_as_string && layout.store_handle_value_type_as_string);
}
