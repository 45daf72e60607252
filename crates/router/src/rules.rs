//! Routing rules: `[[routing.rules]]` entries matched on a statement's digest, the session's
//! schema and its user; the first rule whose every condition holds names the target.

use regex::bytes::{Regex, RegexBuilder};
use serde::Deserialize;

use crate::topology::NodeId;

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Regular expression searched in the statement's digest (literals as `?`, lists as
    /// `?,...`, comments dropped, keywords as written), case-insensitive.
    pub digest: Option<String>,
    /// The session's current schema, exactly.
    pub schema: Option<String>,
    /// The manifold user, exactly.
    pub user: Option<String>,
    /// `primary`, `replicas` (any node but the primary that can read), or a node's
    /// `host:port` as configured.
    pub target: String,
}

/// Where a rule sends a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Primary,
    Replicas,
    Node(NodeId),
}

#[derive(Debug)]
struct Rule {
    digest: Option<Regex>,
    schema: Option<Vec<u8>>,
    user: Option<String>,
    target: Target,
}

/// The rules in configuration order.
#[derive(Debug, Default)]
pub struct Rules {
    rules: Vec<Rule>,
    /// Some rule looks at the digest: sessions compute it.
    needs_digest: bool,
}

impl Rules {
    /// `node(addr)` resolves a `host:port` target to its node.
    pub fn new(
        configs: &[RuleConfig],
        node: impl Fn(&str) -> Option<NodeId>,
    ) -> Result<Rules, String> {
        let mut rules = Vec::with_capacity(configs.len());
        for (i, c) in configs.iter().enumerate() {
            let key = format!("routing.rules[{i}]");
            let digest = match &c.digest {
                Some(d) => Some(
                    RegexBuilder::new(d)
                        .case_insensitive(true)
                        .build()
                        .map_err(|e| format!("{key}.digest: {e}"))?,
                ),
                None => None,
            };
            let target = match c.target.as_str() {
                "primary" => Target::Primary,
                "replicas" => Target::Replicas,
                addr => Target::Node(node(addr).ok_or_else(|| {
                    format!("{key}.target: '{addr}' is not primary, replicas, or a configured node's host:port")
                })?),
            };
            rules.push(Rule {
                digest,
                schema: c.schema.as_ref().map(|s| s.as_bytes().to_vec()),
                user: c.user.clone(),
                target,
            });
        }
        let needs_digest = rules.iter().any(|r| r.digest.is_some());
        Ok(Rules {
            rules,
            needs_digest,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Some rule matches on the digest, so the caller must pass one.
    pub fn needs_digest(&self) -> bool {
        self.needs_digest
    }

    /// The first matching rule's target.
    pub fn route(&self, digest: &[u8], schema: Option<&[u8]>, user: &str) -> Option<Target> {
        self.first_match(digest, schema, user).map(|(_, t)| t)
    }

    /// The first matching rule: its place in the configuration, and its target.
    pub fn first_match(
        &self,
        digest: &[u8],
        schema: Option<&[u8]>,
        user: &str,
    ) -> Option<(usize, Target)> {
        self.rules.iter().enumerate().find_map(|(i, r)| {
            let matches = r.user.as_deref().is_none_or(|u| u == user)
                && r.schema.as_deref().is_none_or(|s| Some(s) == schema)
                && r.digest.as_ref().is_none_or(|d| d.is_match(digest));
            matches.then_some((i, r.target))
        })
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(
        digest: Option<&str>,
        schema: Option<&str>,
        user: Option<&str>,
        target: &str,
    ) -> RuleConfig {
        RuleConfig {
            digest: digest.map(str::to_owned),
            schema: schema.map(str::to_owned),
            user: user.map(str::to_owned),
            target: target.to_owned(),
        }
    }

    fn nodes(addr: &str) -> Option<NodeId> {
        ["p:1", "r:2", "r:3"].iter().position(|a| *a == addr)
    }

    #[test]
    fn first_match_wins_and_every_condition_counts() {
        let rules = Rules::new(
            &[
                rule(Some("^select .* from reports"), None, None, "r:3"),
                rule(None, Some("billing"), None, "primary"),
                rule(None, None, Some("etl"), "replicas"),
            ],
            nodes,
        )
        .unwrap();
        assert!(rules.needs_digest());
        let r =
            |d: &str, s: Option<&str>, u: &str| rules.route(d.as_bytes(), s.map(str::as_bytes), u);
        assert_eq!(
            r("SELECT a FROM reports WHERE id=?", None, "app"),
            Some(Target::Node(2))
        );
        assert_eq!(
            r("SELECT a FROM reports", Some("billing"), "etl"),
            Some(Target::Node(2))
        );
        assert_eq!(r("SELECT ?", Some("billing"), "etl"), Some(Target::Primary));
        assert_eq!(r("SELECT ?", Some("shop"), "etl"), Some(Target::Replicas));
        assert_eq!(r("SELECT ?", None, "app"), None);
    }

    #[test]
    fn bad_rules_are_refused_with_their_key() {
        let e = Rules::new(&[rule(Some("("), None, None, "primary")], nodes).unwrap_err();
        assert!(e.starts_with("routing.rules[0].digest"), "{e}");
        let e = Rules::new(&[rule(None, None, None, "r:9")], nodes).unwrap_err();
        assert!(
            e.contains("routing.rules[0].target") && e.contains("r:9"),
            "{e}"
        );
        assert!(
            !Rules::new(&[rule(None, Some("x"), None, "primary")], nodes)
                .unwrap()
                .needs_digest()
        );
    }
}
