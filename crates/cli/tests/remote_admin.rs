//! Administrators whose keys live on another server (§5.2), with two real
//! `handled serve` processes: A plays the global registry (it homes `0.NA`,
//! so every prefix handle, and the prefix `ADM` holding the admin handles),
//! B homes `TEST`, names identities on A in `server_admins` and finds A
//! through `root_info`. Secret-key answers are checked by A (VERIFY_CHALLENGE),
//! public keys and admin groups are fetched from A, certified.

mod spawn;

use handled_client::{AdminError, AdminSession, ConnectParams, Connection, Credentials, KeyChoice, Protocol};
use handled_proto::codec::Codec;
use handled_proto::data::site::SiteInfo;
use handled_proto::data::vlist::ValueList;
use handled_proto::header::ResponseCode;
use handled_proto::response::ResponseBody;
use handled_proto::value::{types, HandleValue, ValueReference};
use spawn::{serve, Server};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

fn addr(port: &str) -> SocketAddr {
    format!("127.0.0.1:{port}").parse().unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// The global registry A: homes `0.NA` and `ADM`; its ADM admin's
/// credentials, and its site record (the local server's root_info).
struct Registry {
    dir: tempfile::TempDir,
    server: Server,
    root: SiteInfo,
    secret: Credentials,
}

fn registry(rt: &tokio::runtime::Runtime) -> Registry {
    registry_homing(rt, "0.NA,ADM")
}

/// [`registry`] homing these prefixes (`0.NA,ADM,...`).
fn registry_homing(rt: &tokio::runtime::Runtime, prefixes: &str) -> Registry {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &["--prefix", prefixes]);
    let secret = Credentials::load(&dir.path().join("creds-ADM.json"), KeyChoice::Secret).unwrap();
    let root = rt.block_on(site_record(&server.tcp_port));
    Registry { dir, server, root, secret }
}

async fn site_record(port: &str) -> SiteInfo {
    let mut conn = Connection::open(Protocol::Tcp, addr(port), Duration::from_secs(5), false).await.unwrap();
    match conn.site_info().await.unwrap().body {
        ResponseBody::SiteInfo(bytes) => SiteInfo::from_bytes(&bytes).unwrap(),
        other => panic!("{other:?}"),
    }
}

/// A local server naming `admins` on A, with A's site record (`root`) as root_info.
fn local_server(dir: &Path, root: &SiteInfo, admins: &[&str], timeout_ms: u64) -> Server {
    let root_info = dir.join("root_info.bin");
    std::fs::write(&root_info, root.to_bytes()).unwrap();
    let admins: Vec<String> = admins.iter().map(|a| format!("{a:?}")).collect();
    let config = format!(
        "server_admins = [{}]\nroot_info = {:?}\nremote_auth_timeout_ms = {timeout_ms}\n",
        admins.join(", "),
        root_info.display().to_string()
    );
    let path = dir.join("handled.toml");
    std::fs::write(&path, config).unwrap();
    serve(dir, &["--config", path.to_str().unwrap()])
}

async fn admin(port: &str, creds: Credentials) -> AdminSession {
    AdminSession::open(ConnectParams::new(Protocol::Tcp, addr(port)), creds).await.unwrap()
}

/// Create and delete a handle on the server at `port` as `creds`.
async fn create_and_delete(port: &str, creds: Credentials, handle: &str) -> Result<(), AdminError> {
    let mut s = admin(port, creds).await;
    s.create(handle.as_bytes(), &[HandleValue::new(1, "URL", "https://example.org/remote")]).await?;
    s.delete(handle.as_bytes()).await
}

fn refusal(r: Result<(), AdminError>) -> ResponseCode {
    match r {
        Err(e) => e.code().unwrap_or_else(|| panic!("not a refusal: {e}")),
        Ok(()) => panic!("accepted"),
    }
}

/// Give A's ADM admin a group `200:ADM/GROUP` listing `300:ADM/OTHER` (which
/// has a secret key of its own), and its public key also at `300:0.NA/ADM`.
async fn prepare_registry(port: &str, adm: &Credentials) {
    let mut a = admin(port, adm.clone()).await;
    let group = ValueList(vec![ValueReference { handle: b"ADM/OTHER".to_vec(), index: 300 }]);
    a.create(b"ADM/GROUP", &[HandleValue::new(200, types::HS_VLIST, group.to_bytes())]).await.unwrap();
    a.create(b"ADM/OTHER", &[HandleValue::new(300, types::HS_SECKEY, "other-secret")]).await.unwrap();
    let pubkey = a
        .resolve_all(b"ADM/ADMIN")
        .await
        .unwrap()
        .into_iter()
        .find(|v| v.value_type == types::HS_PUBKEY)
        .expect("ADM/ADMIN has a public key");
    a.add_values(b"0.NA/ADM", &[HandleValue { index: 300, ..pubkey }], false).await.unwrap();
}

#[test]
fn admins_held_at_the_registry_administer_the_local_server() {
    let rt = runtime();
    let Registry { dir: dir_a, server: a, root, secret } = registry(&rt);
    let rsa = Credentials::load(&dir_a.path().join("creds-ADM.json"), KeyChoice::PublicKey).unwrap();
    rt.block_on(prepare_registry(&a.tcp_port, &secret));
    let dir_b = tempfile::tempdir().unwrap();
    let admins = ["300:ADM/ADMIN", "301:ADM/ADMIN", "300:0.NA/ADM", "200:ADM/GROUP"];
    let b = local_server(dir_b.path(), &root, &admins, 2000);
    let port = b.tcp_port.clone();
    rt.block_on(async {
        create_and_delete(&port, secret.clone(), "TEST/by-remote-secret").await.expect("secret key checked by A");
        create_and_delete(&port, rsa.clone(), "TEST/by-remote-pubkey").await.expect("public key fetched from A");
        let Credentials { key, .. } = rsa.clone();
        let global = Credentials { handle: b"0.NA/ADM".to_vec(), index: 300, key };
        create_and_delete(&port, global, "TEST/by-prefix-admin").await.expect("0.NA/ADM: the root itself");
        let member = Credentials::secret("ADM/OTHER", 300, "other-secret");
        create_and_delete(&port, member, "TEST/by-group").await.expect("a member of a group held on A");

        let forged = Credentials::secret("ADM/ADMIN", 300, "not-the-secret");
        assert_eq!(refusal(create_and_delete(&port, forged, "TEST/f").await), ResponseCode::AUTHENTICATION_FAILED);
        let b_key = Credentials::load(&dir_b.path().join("creds.json"), KeyChoice::PublicKey).unwrap();
        let wrong_key = Credentials { handle: b"ADM/ADMIN".to_vec(), index: 301, key: b_key.key };
        assert_eq!(refusal(create_and_delete(&port, wrong_key, "TEST/w").await), ResponseCode::AUTHENTICATION_FAILED);
        let not_named = Credentials::secret("ADM/OTHER", 300, "other-secret");
        let mut s = admin(&port, not_named).await;
        let r = s.home_prefix(b"0.NA/OTHER").await;
        assert!(r.is_ok(), "the group member is a server admin: {r:?}");
        let unknown_prefix = Credentials::secret("NOPE/ADMIN", 300, "x");
        assert_eq!(
            refusal(create_and_delete(&port, unknown_prefix, "TEST/n").await),
            ResponseCode::AUTHEN_ERROR,
            "a prefix the root does not know is an error, as the Java resolver's"
        );
    });

    drop(a);
    rt.block_on(async {
        let started = Instant::now();
        let r = create_and_delete(&port, secret.clone(), "TEST/registry-down").await;
        assert_eq!(refusal(r), ResponseCode::AUTHEN_ERROR, "A down: cannot verify");
        assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    });
    drop(b);
}

/// A registry that accepts connections and never answers: the check ends at
/// `remote_auth_timeout_ms` with an authentication error, not a hang.
#[test]
fn a_silent_registry_is_an_error_within_the_time_limit() {
    let rt = runtime();
    let Registry { dir: _dir_a, server: a, mut root, secret } = registry(&rt);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut open = Vec::new();
        for s in silent.incoming().take(4) {
            open.push(s);
        }
        std::thread::sleep(Duration::from_secs(10));
    });
    for server in &mut root.servers {
        server.interfaces.iter_mut().for_each(|i| i.port = i32::from(silent_port));
    }
    let dir_b = tempfile::tempdir().unwrap();
    let b = local_server(dir_b.path(), &root, &["300:ADM/ADMIN"], 1000);
    rt.block_on(async {
        let started = Instant::now();
        let r = create_and_delete(&b.tcp_port, secret, "TEST/silent").await;
        assert_eq!(refusal(r), ResponseCode::AUTHEN_ERROR);
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(8), "{took:?}");
    });
    drop((a, b));
    drop(held);
}

/// Replies that do not verify with the key root_info publishes for the
/// registry are not believed (406), even though the registry is the real one.
#[test]
fn replies_not_signed_by_the_published_key_are_not_believed() {
    let rt = runtime();
    let Registry { dir: _dir_a, server: a, mut root, secret } = registry(&rt);
    let other_key = rt.block_on(async {
        let mut s = admin(&a.tcp_port, secret.clone()).await;
        let values = s.resolve_all(b"ADM/ADMIN").await.unwrap();
        values.into_iter().find(|v| v.value_type == types::HS_PUBKEY).unwrap().data
    });
    root.servers[0].public_key = other_key;
    let dir_b = tempfile::tempdir().unwrap();
    let b = local_server(dir_b.path(), &root, &["300:ADM/ADMIN"], 2000);
    rt.block_on(async {
        let r = create_and_delete(&b.tcp_port, secret, "TEST/uncertified").await;
        assert_eq!(refusal(r), ResponseCode::AUTHEN_ERROR);
    });
    drop((a, b));
}

/// SIGHUP reads `root_info` again: a server started with a root site whose key
/// is wrong refuses the remote admin, and accepts it once the file is fixed and
/// the server told to reload (no restart).
#[test]
fn sighup_reads_root_info_again() {
    let rt = runtime();
    let Registry { dir: _dir_a, server: a, root, secret } = registry(&rt);
    let mut wrong = root.clone();
    wrong.servers[0].public_key = rt.block_on(async {
        let mut s = admin(&a.tcp_port, secret.clone()).await;
        let values = s.resolve_all(b"ADM/ADMIN").await.unwrap();
        values.into_iter().find(|v| v.value_type == types::HS_PUBKEY).unwrap().data
    });
    let dir_b = tempfile::tempdir().unwrap();
    let b = local_server(dir_b.path(), &wrong, &["300:ADM/ADMIN"], 2000);
    rt.block_on(async {
        let r = create_and_delete(&b.tcp_port, secret.clone(), "TEST/before-reload").await;
        assert_eq!(refusal(r), ResponseCode::AUTHEN_ERROR);
    });
    std::fs::write(dir_b.path().join("root_info.bin"), root.to_bytes()).unwrap();
    let hup = std::process::Command::new("kill").args(["-HUP", &b.child.id().to_string()]).status().unwrap();
    assert!(hup.success());
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match create_and_delete(&b.tcp_port, secret.clone(), "TEST/after-reload").await {
                Ok(()) => break,
                Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(e) => panic!("still refused after SIGHUP: {e:?}"),
            }
        }
    });
    drop((a, b));
}

/// Make `0.NA/<prefix>` on the registry point at a service handle (HS_SERV)
/// instead of listing its site, as its own admin.
async fn serve_prefix_through(port: &str, dir: &Path, prefix: &str, service: &str) {
    let creds = Credentials::load(&dir.join(format!("creds-{prefix}.json")), KeyChoice::Secret).unwrap();
    let mut s = admin(port, creds).await;
    let prefix_handle = format!("0.NA/{prefix}");
    let values = s.resolve_all(prefix_handle.as_bytes()).await.unwrap();
    let sites: Vec<i32> = values.iter().filter(|v| v.value_type == types::HS_SITE).map(|v| v.index).collect();
    assert!(!sites.is_empty(), "{values:?}");
    s.add_values(prefix_handle.as_bytes(), &[HandleValue::new(2000, types::HS_SERV, service)], false).await.unwrap();
    s.remove_values(prefix_handle.as_bytes(), &sites).await.unwrap();
}

/// A prefix served through a service handle (HS_SERV) is followed to its
/// sites; a service handle naming itself ends in an error (406), not a loop.
#[test]
fn service_handles_are_followed_a_bounded_number_of_times() {
    let rt = runtime();
    let Registry { dir: dir_a, server: a, root, .. } = registry_homing(&rt, "0.NA,ADM,SVC,LOOP");
    rt.block_on(async {
        serve_prefix_through(&a.tcp_port, dir_a.path(), "SVC", "0.NA/ADM").await;
        serve_prefix_through(&a.tcp_port, dir_a.path(), "LOOP", "0.NA/LOOP").await;
    });
    let dir_b = tempfile::tempdir().unwrap();
    let b = local_server(dir_b.path(), &root, &["300:SVC/ADMIN", "300:LOOP/ADMIN"], 2000);
    let creds = |prefix: &str| Credentials::load(&dir_a.path().join(format!("creds-{prefix}.json")), KeyChoice::Secret);
    rt.block_on(async {
        create_and_delete(&b.tcp_port, creds("SVC").unwrap(), "TEST/by-service").await.expect("through HS_SERV");
        let looped = create_and_delete(&b.tcp_port, creds("LOOP").unwrap(), "TEST/by-loop").await;
        assert_eq!(refusal(looped), ResponseCode::AUTHEN_ERROR);
    });
    drop((a, b));
}

/// A remote identity's keys are tried up to 16 (each is a signature check
/// here): `0:ADM/MANY` with 16 other keys first is refused, with 15 it passes.
#[test]
fn only_the_first_sixteen_keys_of_a_remote_identity_are_tried() {
    let rt = runtime();
    let Registry { dir: dir_a, server: a, root, secret } = registry(&rt);
    let rsa = Credentials::load(&dir_a.path().join("creds-ADM.json"), KeyChoice::PublicKey).unwrap();
    let other = HandleValue::new(0, types::HS_PUBKEY, root.servers[0].public_key.clone());
    rt.block_on(async {
        let mut s = admin(&a.tcp_port, secret.clone()).await;
        let values = s.resolve_all(b"ADM/ADMIN").await.unwrap();
        let key = values.into_iter().find(|v| v.value_type == types::HS_PUBKEY).unwrap();
        let mut many: Vec<HandleValue> = (400..416).map(|i| HandleValue { index: i, ..other.clone() }).collect();
        many.push(HandleValue { index: 500, ..key });
        s.create(b"ADM/MANY", &many).await.unwrap();
    });
    let dir_b = tempfile::tempdir().unwrap();
    let b = local_server(dir_b.path(), &root, &["ADM/MANY"], 2000);
    let as_many = || Credentials { handle: b"ADM/MANY".to_vec(), index: 0, key: rsa.key.clone() };
    rt.block_on(async {
        let r = create_and_delete(&b.tcp_port, as_many(), "TEST/many-1").await;
        assert_eq!(refusal(r), ResponseCode::AUTHENTICATION_FAILED, "the key is the 17th");
        admin(&a.tcp_port, secret).await.remove_values(b"ADM/MANY", &[400]).await.unwrap();
        create_and_delete(&b.tcp_port, as_many(), "TEST/many-2").await.expect("the key is the 16th");
    });
    drop((a, b));
}

/// Issue 25 R2: strangers claiming identities of a prefix whose server never
/// answers cannot lock the real remote administrator out. Four attacker
/// threads keep claiming `300:SLOW/x` (each claim held a turn for the whole
/// time limit, and four took every turn); the real admin signs in throughout.
#[test]
fn strangers_at_a_silent_prefix_do_not_lock_the_real_admin_out() {
    let rt = runtime();
    let Registry { dir: dir_a, server: a, root, secret } = registry_homing(&rt, "0.NA,ADM,SLOW");
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let holder = {
        let stop = stop.clone();
        silent.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let mut open = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match silent.accept() {
                    Ok((s, _)) if open.len() < 512 => open.push(s),
                    _ => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        })
    };
    // 0.NA/SLOW names a site whose one server never answers.
    let mut slow_site = root.clone();
    for server in &mut slow_site.servers {
        server.interfaces.iter_mut().for_each(|i| i.port = i32::from(silent_port));
    }
    rt.block_on(async {
        let creds = Credentials::load(&dir_a.path().join("creds-SLOW.json"), KeyChoice::Secret).unwrap();
        let mut s = admin(&a.tcp_port, creds).await;
        let values = s.resolve_all(b"0.NA/SLOW").await.unwrap();
        let sites: Vec<i32> = values.iter().filter(|v| v.value_type == types::HS_SITE).map(|v| v.index).collect();
        s.add_values(b"0.NA/SLOW", &[HandleValue::new(2001, types::HS_SITE, slow_site.to_bytes())], false)
            .await
            .unwrap();
        s.remove_values(b"0.NA/SLOW", &sites).await.unwrap();
    });
    let dir_b = tempfile::tempdir().unwrap();
    let b = local_server(dir_b.path(), &root, &["300:ADM/ADMIN"], 2000);
    let port = b.tcp_port.clone();
    // The real admin has signed in before.
    rt.block_on(create_and_delete(&port, secret.clone(), "TEST/before")).expect("before the attack");

    let attack_until = Instant::now() + Duration::from_secs(8);
    let attackers: Vec<_> = (0..4)
        .map(|i| {
            let port = port.clone();
            std::thread::spawn(move || {
                let rt = runtime();
                let mut claims = 0;
                while Instant::now() < attack_until && claims < 40 {
                    let stranger = Credentials::secret(format!("SLOW/x{i}-{claims}"), 300, "guess");
                    let _ = rt.block_on(create_and_delete(&port, stranger, "TEST/never"));
                    claims += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                claims
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let (mut ok, mut refused) = (0, Vec::new());
    rt.block_on(async {
        for n in 0..12 {
            match create_and_delete(&port, secret.clone(), &format!("TEST/during-{n}")).await {
                Ok(()) => ok += 1,
                Err(e) => refused.push(format!("{e:?}")),
            }
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
    });
    let claims: usize = attackers.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(claims >= 8, "the attack ran ({claims} claims)");
    assert_eq!(ok, 12, "the real admin was locked out {} times: {refused:?}", refused.len());
    // What the strangers were told names no address and no connect error.
    rt.block_on(async {
        let stranger = Credentials::secret("SLOW/late", 300, "guess");
        let e = create_and_delete(&port, stranger, "TEST/never").await.unwrap_err();
        let text = format!("{e:?}");
        assert!(!text.contains(&silent_port.to_string()) && !text.contains("refused"), "{text}");
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    holder.join().unwrap();
    drop((a, b));
}

/// Issue 25 R3: whoever controls a prefix's HS_SITE chose the address the
/// server connects to, and the refusal quoted the connect error ("Connection
/// refused") or the other service's bytes: a port scanner and banner oracle.
/// Now the client hears only that the check failed.
#[test]
fn a_failed_remote_check_reveals_nothing_of_the_address_asked() {
    let rt = runtime();
    let Registry { dir: dir_a, server: a, root, .. } = registry_homing(&rt, "0.NA,ADM,SCAN,BANNER");
    // Nothing listens on one port; another answers with bytes of another protocol.
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let banner = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let banner_port = banner.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in banner.incoming().take(8).flatten() {
            let _ = std::io::Write::write_all(&mut &s, b"SSH-2.0-OpenSSH_9.2 secret-banner\r\n");
        }
    });
    for (prefix, port) in [("SCAN", closed_port), ("BANNER", banner_port)] {
        let mut site = root.clone();
        for server in &mut site.servers {
            server.interfaces.iter_mut().for_each(|i| i.port = i32::from(port));
        }
        rt.block_on(async {
            let creds =
                Credentials::load(&dir_a.path().join(format!("creds-{prefix}.json")), KeyChoice::Secret).unwrap();
            let mut s = admin(&a.tcp_port, creds).await;
            let prefix_handle = format!("0.NA/{prefix}");
            let values = s.resolve_all(prefix_handle.as_bytes()).await.unwrap();
            let old: Vec<i32> = values.iter().filter(|v| v.value_type == types::HS_SITE).map(|v| v.index).collect();
            s.add_values(prefix_handle.as_bytes(), &[HandleValue::new(2001, types::HS_SITE, site.to_bytes())], false)
                .await
                .unwrap();
            s.remove_values(prefix_handle.as_bytes(), &old).await.unwrap();
        });
    }
    let dir_b = tempfile::tempdir().unwrap();
    let b = local_server(dir_b.path(), &root, &["300:ADM/ADMIN"], 2000);
    rt.block_on(async {
        for (prefix, port) in [("SCAN", closed_port), ("BANNER", banner_port)] {
            let claim = Credentials::secret(format!("{prefix}/x"), 300, "guess");
            let e = create_and_delete(&b.tcp_port, claim, "TEST/never").await.unwrap_err();
            assert_eq!(e.code(), Some(ResponseCode::AUTHEN_ERROR), "{e:?}");
            let text = format!("{e:?}");
            for leak in [port.to_string(), "refused".into(), "SSH".into(), "banner".into(), "length".into()] {
                assert!(!text.contains(&leak), "{prefix}: the refusal says {leak:?}: {text}");
            }
        }
    });
    drop((a, b));
}
