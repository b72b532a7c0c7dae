//! Who may do what: server-wide administrators, who reads the status handle,
//! and the switches read on every request. These are the keys SIGHUP reloads
//! (with the HTTPS certificate and `root_info`): [`crate::live::Live`] holds
//! their parsed form.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct AccessConfig {
    /// Server-wide administrators, `index:handle` or `handle` (= index 0, any
    /// key of that handle), as in Handle.Net's `server_admins`. Empty: no
    /// server-wide admin; each `<prefix>/ADMIN` administers its own prefix only
    /// (a multi-tenant server), and prefix operations (home/unhome/list homed
    /// prefixes, backups) are refused. Not set at all on a single-prefix
    /// server: that prefix's admin (see [`Config::default_server_admins`]).
    pub server_admins: Vec<String>,
    /// Whether the configuration file named `server_admins` (even as `[]`).
    #[serde(skip)]
    pub server_admins_given: bool,
    /// Server administrators may do anything, not only home/unhome/list prefixes.
    pub server_admin_full_access: bool,
    /// Who may read the status handle `0.SITE/status`, besides `server_admins`
    /// (Handle.Net's key; same `index:handle` form).
    pub status_handle_admins: Vec<String>,
    /// Allow LIST_HANDLES (§3.5: a server may disable it).
    pub allow_list_handles: bool,
    /// Let JSON API credentials count over plain HTTP (Handle.Net ignores them there).
    pub allow_plain_http_admin: bool,
}

impl Default for AccessConfig {
    fn default() -> Self {
        AccessConfig {
            server_admins: Vec::new(),
            server_admins_given: false,
            server_admin_full_access: true,
            status_handle_admins: Vec::new(),
            allow_list_handles: true,
            allow_plain_http_admin: false,
        }
    }
}
