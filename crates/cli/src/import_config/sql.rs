//! `server_config.storage_type = "sql"` and its `sql_settings` (Technical
//! Manual §8.1.1) → `store = "sql"` and the `[sql]` table: the same database,
//! served as it is. The password goes to a file of its own (owner-only), as
//! the server keys do, never into handled.toml.

use super::mapping::{yes, Toml};
use super::Output;
use handled_proto::streamtable::{Dict, Value};

/// Where the password from `sql_settings.sql_passwd` is written under --out.
const PASSWORD_FILE: &str = "sql-password";

/// What DSpace's handle server names in `storage_class` (`storage_type = "CUSTOM"`).
const DSPACE_PLUGIN: &str = "org.dspace.handle.HandlePlugin";

/// Why a DSpace installation's configuration is not written: its handles are
/// rows of DSpace's own table, and config.dct holds neither that database nor
/// the repository's address.
const DSPACE_STOP: &str = "config.dct serves handles through DSpace's HandlePlugin \
(server_config.storage_class = \"org.dspace.handle.HandlePlugin\"): they are rows of DSpace's own \
`handle` table, which handled serves read-only from DSpace's database as they are, with no copy. \
config.dct holds neither that database nor the repository's address, so no configuration was \
written: start from docs/sql-dspace-example.toml (PostgreSQL) or docs/sql-dspace-example-mariadb.toml, \
set [sql] url to DSpace's db.url (its local.cfg) and the address in get_handle_stmt to its \
dspace.ui.url; docs/migrating.md, \"DSpace\", says each step";

/// Map the storage settings of `server_config`.
pub fn map(server_config: Option<&Dict>, o: &mut Output) -> anyhow::Result<()> {
    let Some(sc) = server_config else { return Ok(()) };
    let storage = sc.get("storage_type").and_then(Value::as_str).map(|s| s.trim().to_ascii_lowercase());
    let class = sc.get("storage_class").and_then(Value::as_str).map(str::trim);
    if storage.as_deref() == Some("custom") && class == Some(DSPACE_PLUGIN) {
        anyhow::bail!(DSPACE_STOP);
    }
    let settings = match sc.get("sql_settings") {
        Some(Value::Dict(d)) => Some(d),
        Some(_) => {
            o.m.skip("server_config.sql_settings", "not a { } dictionary; ignored");
            None
        }
        None => None,
    };
    if storage.as_deref() != Some("sql") {
        let why = "handled keeps handles in its own store (`store`); the handles come over by replication \
                   (docs/migrating.md)";
        if let Some(s) = &storage {
            o.m.skip("server_config.storage_type", &format!("{s}: {why}"));
        }
        if settings.is_some() {
            o.m.skip("server_config.sql_settings", "storage_type is not \"sql\": Handle.Net does not use it either");
        }
        return Ok(());
    }
    o.m.set("store", Toml::Str("sql".into()), "server_config.storage_type (the same database, served as it is)");
    let Some(settings) = settings else {
        o.m.skip("server_config.storage_type", "sql without sql_settings: set `url` in [sql] by hand");
        return Ok(());
    };
    map_settings(settings, o)
}

fn map_settings(d: &Dict, o: &mut Output) -> anyhow::Result<()> {
    let get = |k: &str| d.get(k).and_then(Value::as_str).map(str::to_string);
    let login = get("sql_login");
    let mut custom = Vec::new();
    for (key, value) in &d.0 {
        let origin = format!("server_config.sql_settings.{key}");
        let text = value.as_str().unwrap_or_default();
        match key.as_str() {
            "sql_url" => match url_of(text, login.as_deref()) {
                Ok((url, dropped)) => {
                    o.m.set("sql.url", Toml::Str(url), &format!("{origin} and sql_login"));
                    if !dropped.is_empty() {
                        o.m.skip(
                            &origin,
                            &format!(
                                "JDBC parameters {} not carried: the driver's own are given in `url` \
                                 (`?sslmode=…`; `tls_ca` for a verified TLS connection)",
                                dropped.join(", ")
                            ),
                        );
                    }
                }
                Err(why) => o.m.skip(&origin, &why),
            },
            "sql_login" => {}
            "sql_passwd" => {
                let path = o.write_private(PASSWORD_FILE, text.as_bytes())?;
                o.m.set("sql.password_file", Toml::Str(path.display().to_string()), &format!("{origin} (owner-only)"));
            }
            "sql_driver" => o.m.skip(&origin, "implied by the url's scheme (postgres://, mariadb://)"),
            "sql_read_only" => o.m.set("sql.read_only", Toml::Bool(yes(text)), &origin),
            k if handled_store::sql::SqlStmt::from_key(k).is_some() => {
                o.m.set(&format!("sql.{k}"), Toml::Str(text.to_string()), &origin);
                custom.push(k.to_string());
            }
            // The same layout of the same tables (text columns), under the same names.
            "store_handle_as_string" | "store_na_as_string" | "store_handle_value_type_as_string" => {
                o.m.set(&format!("sql.{key}"), Toml::Bool(yes(text)), &origin)
            }
            "trace_sql" => o.m.skip(&origin, "no such switch: HANDLED_LOG=sqlx::query=debug logs every statement"),
            "compensate_for_oracle_jdbc_bug" => o.m.skip(&origin, "Oracle is not served (PostgreSQL, MariaDB/MySQL)"),
            _ => o.m.skip(&origin, "no equivalent in handled's [sql]"),
        }
    }
    if d.get("sql_url").is_none() {
        o.m.skip("server_config.sql_settings", "no sql_url: set `url` in [sql] by hand");
    }
    let read_only = get("sql_read_only").is_some_and(|v| yes(&v));
    if custom.iter().any(|k| k == "get_handle_stmt") && !read_only {
        let given = custom.iter().filter_map(|k| handled_store::sql::SqlStmt::from_key(k));
        let lacking = handled_store::sql::writable_view_lacks(given);
        if !lacking.is_empty() {
            o.m.skip(
                "server_config.sql_settings",
                &format!(
                    "a custom get_handle_stmt without sql_read_only: handled writes such a view only through its own \
                     statements (Handle.Net would write its default tables, which the view does not read), and will \
                     not start until [sql] has {} too, or `read_only = true`",
                    lacking.join(", ")
                ),
            );
        }
    }
    Ok(())
}

/// A JDBC URL (`jdbc:postgresql://host:5432/db`, `jdbc:mysql://…`,
/// `jdbc:mariadb://…`) as handled's `url`, with `login` as its user; and the
/// names of the JDBC parameters left out (their values may be secrets).
pub fn url_of(jdbc: &str, login: Option<&str>) -> Result<(String, Vec<String>), String> {
    let rest = jdbc.trim().strip_prefix("jdbc:").ok_or_else(|| format!("{jdbc:?} is not a JDBC URL (jdbc:…)"))?;
    let (driver, rest) = rest.split_once(':').ok_or_else(|| format!("{jdbc:?}: no database after jdbc:"))?;
    let scheme = match driver.to_ascii_lowercase().as_str() {
        "postgresql" => "postgres",
        "mysql" => "mysql",
        "mariadb" => "mariadb",
        other => return Err(format!("{other}: handled serves PostgreSQL and MariaDB/MySQL only")),
    };
    let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
    // `jdbc:postgresql:db` (no host) is the local server on the default port.
    let location = match location.strip_prefix("//") {
        Some(l) => l.to_string(),
        None => format!("localhost/{location}"),
    };
    let mut user = login.map(str::to_string);
    let mut dropped = Vec::new();
    for pair in query.split(['&', ';']).filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("user", u)) if user.is_none() => user = Some(u.to_string()),
            Some((name, _)) => dropped.push(name.to_string()),
            None => dropped.push(pair.to_string()),
        }
    }
    let user = user.map(|u| format!("{}@", percent(&u))).unwrap_or_default();
    Ok((format!("{scheme}://{user}{location}"), dropped))
}

/// A user name as a URL's userinfo holds it.
fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jdbc_urls_become_driver_urls() {
        let url = |j: &str, l: Option<&str>| url_of(j, l).map(|(u, d)| (u, d.join(",")));
        assert_eq!(
            url("jdbc:postgresql://db.example:5432/handlesystem", Some("handleserver")).unwrap(),
            ("postgres://handleserver@db.example:5432/handlesystem".into(), String::new())
        );
        assert_eq!(url("jdbc:mysql://h/hs", None).unwrap().0, "mysql://h/hs");
        assert_eq!(
            url("jdbc:mariadb://h:3306/hs?user=u&password=s3cret", None).unwrap(),
            ("mariadb://u@h:3306/hs".into(), "password".into())
        );
        assert_eq!(url("jdbc:postgresql:hs", Some("a b")).unwrap().0, "postgres://a%20b@localhost/hs");
        assert!(url("jdbc:oracle:thin:@h:1521:hs", None).unwrap_err().contains("oracle"));
        assert!(url("postgres://h/hs", None).unwrap_err().contains("JDBC"));
    }
}
