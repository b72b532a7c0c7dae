//! The configuration keys read on every request that SIGHUP may change
//! (see [`crate::reload`]).

use crate::config::Config;

/// Configuration read on every request that may change while serving.
#[derive(Debug, Clone)]
pub struct Live {
    /// Server-wide administrators as (handle, index) references.
    pub server_admins: Vec<(Vec<u8>, i32)>,
    /// Who else may read the status handle `0.SITE/status`.
    pub status_handle_admins: Vec<(Vec<u8>, i32)>,
    /// Admins scoped to one prefix: (admin handle, prefix handle `0.NA/<PREFIX>`).
    pub prefix_admins: Vec<(Vec<u8>, Vec<u8>)>,
    pub server_admin_full_access: bool,
    pub allow_list_handles: bool,
    pub allow_plain_http_admin: bool,
}

impl Live {
    /// `config`'s values; its admin references must have been validated.
    pub fn of(config: &Config) -> Live {
        Live {
            server_admins: config.parsed_server_admins().unwrap_or_default(),
            status_handle_admins: crate::config::parse_admin_list(&config.access.status_handle_admins)
                .unwrap_or_default(),
            prefix_admins: config.prefix_admins(),
            server_admin_full_access: config.access.server_admin_full_access,
            allow_list_handles: config.access.allow_list_handles,
            allow_plain_http_admin: config.access.allow_plain_http_admin,
        }
    }

    /// The configuration keys whose values differ between `self` and `other`.
    pub fn changed_keys(&self, other: &Live) -> Vec<&'static str> {
        let mut changed = Vec::new();
        if self.server_admins != other.server_admins {
            changed.push("server_admins");
        }
        if self.server_admin_full_access != other.server_admin_full_access {
            changed.push("server_admin_full_access");
        }
        if self.allow_list_handles != other.allow_list_handles {
            changed.push("allow_list_handles");
        }
        if self.allow_plain_http_admin != other.allow_plain_http_admin {
            changed.push("allow_plain_http_admin");
        }
        if self.status_handle_admins != other.status_handle_admins {
            changed.push("status_handle_admins");
        }
        changed
    }
}
