//! The table of users clients log in as, built once from configuration and swapped whole.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use manifold_mysql_proto::auth;

use crate::config::UserConfig;

#[derive(Debug)]
pub struct User {
    pub name: String,
    pub native_hash: Option<[u8; 20]>,
    pub sha2_hash: Option<[u8; 32]>,
    pub backend_user: String,
    pub backend_password: String,
    pub max_connections: usize,
    /// Sees every user's sessions in the process list (`[[users]] process`).
    pub process: bool,
    /// Sessions logged in as this user now, on every worker: one atomic add at login and
    /// one subtract at the end, on this user's own counter.
    connections: AtomicUsize,
}

impl User {
    /// Counts a new session of this user unless that would pass `max_connections`.
    pub fn acquire_connection(&self) -> bool {
        if self.max_connections == 0 {
            self.connections.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        self.connections
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.max_connections).then_some(n + 1)
            })
            .is_ok()
    }

    pub fn release_connection(&self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }

    /// The plugin this user authenticates with when the client proposes one we cannot check.
    pub fn preferred_plugin(&self, default: &str) -> &'static str {
        match (self.native_hash.is_some(), self.sha2_hash.is_some()) {
            (true, true) if default == auth::CACHING_SHA2_PASSWORD => auth::CACHING_SHA2_PASSWORD,
            (false, true) => auth::CACHING_SHA2_PASSWORD,
            _ => auth::NATIVE_PASSWORD,
        }
    }

    pub fn supports(&self, plugin: &str) -> bool {
        (plugin == auth::NATIVE_PASSWORD && self.native_hash.is_some())
            || (plugin == auth::CACHING_SHA2_PASSWORD && self.sha2_hash.is_some())
    }
}

/// What an unknown user name is checked against when no user is configured at all: both
/// hashes, random, so that no password matches them.
fn unknown_user() -> &'static User {
    static UNKNOWN: std::sync::OnceLock<User> = std::sync::OnceLock::new();
    UNKNOWN.get_or_init(|| User::decoy_of(None))
}

/// The per-process key of the hash that maps an unknown user name to a decoy: the same name
/// gets the same decoy for the life of the process (a real account never changes plugin
/// between attempts), yet no one outside can compute which.
fn decoy_hasher() -> &'static std::collections::hash_map::RandomState {
    static KEY: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    KEY.get_or_init(Default::default)
}

impl User {
    /// A user that cannot log in, shaped like `like` (the same kinds of password hash, so the
    /// same plugin choices and the same hashing work), its hashes random so that no password
    /// matches them. `None`: both kinds.
    fn decoy_of(like: Option<&User>) -> User {
        let random32 = || {
            let (a, b) = (auth::generate_scramble(), auth::generate_scramble());
            let mut out = [0u8; 32];
            out[..20].copy_from_slice(&a);
            out[20..].copy_from_slice(&b[..12]);
            out
        };
        let (native, sha2) = like.map_or((true, true), |u| {
            (u.native_hash.is_some(), u.sha2_hash.is_some())
        });
        User {
            // No configured user has an empty name, so this one is never in the sha2 cache.
            name: String::new(),
            native_hash: native.then(auth::generate_scramble),
            sha2_hash: sha2.then(random32),
            backend_user: String::new(),
            backend_password: String::new(),
            max_connections: 0,
            process: false,
            connections: AtomicUsize::new(0),
        }
    }
}

#[derive(Debug, Default)]
pub struct Users {
    by_name: HashMap<String, Arc<User>>,
    /// One decoy per configured user, in the order of their names: what an unknown name is
    /// checked against ([`Users::decoy_for`]).
    decoys: Vec<User>,
}

impl Users {
    /// The user table of the configuration. The error names the user at fault for the
    /// operator (at start or reload), hence a `String`.
    pub fn from_config(users: &[UserConfig]) -> Result<Users, String> {
        let mut by_name = HashMap::new();
        for (i, u) in users.iter().enumerate() {
            u.validate(i)?;
            let user = User {
                name: u.name.clone(),
                native_hash: u
                    .password_native
                    .as_deref()
                    .map(auth::parse_native_hash)
                    .transpose()
                    .map_err(|e| e.to_string())?,
                sha2_hash: u
                    .password_sha2
                    .as_deref()
                    .map(auth::parse_sha2_hash)
                    .transpose()
                    .map_err(|e| e.to_string())?,
                backend_user: u.backend_user.clone().unwrap_or_else(|| u.name.clone()),
                backend_password: u.backend_password.clone(),
                max_connections: u.max_connections,
                process: u.process,
                connections: AtomicUsize::new(0),
            };
            if by_name.insert(u.name.clone(), Arc::new(user)).is_some() {
                return Err(format!(
                    "users[{i}].name: user '{}' is defined twice",
                    u.name
                ));
            }
        }
        let mut names: Vec<&String> = by_name.keys().collect();
        names.sort();
        let decoys = names
            .into_iter()
            .map(|n| User::decoy_of(Some(&by_name[n])))
            .collect();
        Ok(Users { by_name, decoys })
    }

    /// The account an unknown user name is checked against, so that the exchange a client
    /// sees (plugin switch or not, the caching_sha2 steps) and the hashing done are those of a
    /// wrong password for a real account, never a faster or different answer saying "no such
    /// user". As MariaDB does (`find_mpvio_user` takes the configured account a hash of the
    /// name picks), the name maps to one configured user, always the same one for the same
    /// name, so unknown names show the configured accounts' mix of plugins; the decoy is shaped
    /// like that user but no password matches it. MySQL instead gives unknown accounts a random
    /// built-in plugin (remembered per name), which shows a plugin no real account has.
    pub fn decoy_for(&self, name: &[u8]) -> &User {
        use std::hash::BuildHasher;
        if self.decoys.is_empty() {
            return unknown_user();
        }
        let pick = decoy_hasher().hash_one(name) % self.decoys.len() as u64;
        &self.decoys[pick as usize]
    }

    pub fn get(&self, name: &[u8]) -> Option<&Arc<User>> {
        std::str::from_utf8(name)
            .ok()
            .and_then(|n| self.by_name.get(n))
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, native: bool, sha2: bool) -> UserConfig {
        let pw = format!("{name}-pw");
        UserConfig {
            name: name.into(),
            password_native: native
                .then(|| auth::format_native_hash(&auth::native_stored_hash(pw.as_bytes()))),
            password_sha2: sha2
                .then(|| auth::format_sha2_hash(&auth::sha2_stored_hash(pw.as_bytes()))),
            backend_user: None,
            backend_password: String::new(),
            max_connections: 0,
            process: false,
        }
    }

    fn kind(u: &User) -> (bool, bool) {
        (u.native_hash.is_some(), u.sha2_hash.is_some())
    }

    #[test]
    fn unknown_names_are_shaped_like_configured_users_and_match_no_password() {
        let configs = [
            user("both", true, true),
            user("native", true, false),
            user("sha2", false, true),
        ];
        let users = Users::from_config(&configs).unwrap();
        let mut kinds = std::collections::HashSet::new();
        for i in 0..200 {
            let name = format!("ghost{i}");
            let decoy = users.decoy_for(name.as_bytes());
            // The same name always meets the same decoy, as a real account's plugin never
            // changes between attempts.
            assert!(std::ptr::eq(decoy, users.decoy_for(name.as_bytes())));
            assert!(
                decoy.name.is_empty(),
                "a decoy's name is never a configured one"
            );
            kinds.insert(kind(decoy));
            let scramble = auth::generate_scramble();
            for c in &configs {
                let pw = format!("{}-pw", c.name);
                let pw = pw.as_bytes();
                assert!(!auth::native_verify(
                    decoy.native_hash.as_ref(),
                    &scramble,
                    &auth::native_scramble(pw, &scramble)
                ));
                assert!(!auth::sha2_verify_fast(
                    decoy.sha2_hash.as_ref(),
                    &scramble,
                    &auth::sha2_scramble(pw, &scramble)
                ));
                assert!(!auth::sha2_verify_cleartext(decoy.sha2_hash.as_ref(), pw));
                // Nor does an empty password, with whichever hash it has (it has one).
                assert!(decoy.native_hash.is_some() || decoy.sha2_hash.is_some());
                if decoy.native_hash.is_some() {
                    assert!(!auth::native_verify_cleartext(
                        decoy.native_hash.as_ref(),
                        b""
                    ));
                }
                if decoy.sha2_hash.is_some() {
                    assert!(!auth::sha2_verify_cleartext(decoy.sha2_hash.as_ref(), b""));
                }
            }
        }
        // Unknown names together show exactly the configured kinds of account.
        let configured: std::collections::HashSet<_> =
            [(true, true), (true, false), (false, true)].into();
        assert_eq!(kinds, configured);
    }

    #[test]
    fn with_one_kind_configured_every_unknown_name_has_that_kind() {
        let users = Users::from_config(&[user("a", false, true), user("b", false, true)]).unwrap();
        for i in 0..50 {
            assert_eq!(
                kind(users.decoy_for(format!("x{i}").as_bytes())),
                (false, true)
            );
        }
    }

    #[test]
    fn no_users_configured_checks_against_both_kinds() {
        let users = Users::from_config(&[]).unwrap();
        assert_eq!(kind(users.decoy_for(b"anyone")), (true, true));
    }
}
