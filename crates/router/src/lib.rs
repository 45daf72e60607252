#![forbid(unsafe_code)]
//! Where each statement runs.
//!
//! This crate owns the cluster's topology (a primary and its replicas, from the
//! configuration), what is known of each node's health, lag and GTID position, the background
//! monitor that keeps that knowledge fresh, and the choice of a node for a read (least
//! outstanding requests weighted by read weight). It must not touch client connections or
//! look at SQL text: the front door classifies statements with `sql-lex` and asks the
//! topology and its worker's [`Balancer`] where they may go. Routing a statement reads
//! relaxed atomics only; anything that writes shared state (a shun, a monitor result) is off
//! the request path.

pub mod causal;
pub mod config;
pub mod gtid;
pub mod monitor;
pub mod rules;
pub mod topology;

pub use config::{CausalReads, MonitorConfig, ReplicaConfig, ReplicaEntry, RoutingConfig};
pub use gtid::{Gtid, GtidPos};
pub use monitor::Monitor;
pub use rules::{RuleConfig, Rules, Target};
pub use topology::{Balancer, Node, NodeId, ReadOnly, Topology, MAX_NODES};
