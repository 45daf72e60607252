//! Pub/Sub commands: `SUBSCRIBE`, `PSUBSCRIBE`, `UNSUBSCRIBE`, `PUNSUBSCRIBE`, `PUBLISH`,
//! `PUBSUB CHANNELS|NUMSUB|NUMPAT|HELP` (the hub is [`crate::pubsub`]).

use manifold_redis_proto::{Protocol, Reply};

use super::Session;
use crate::cmd::Command;
use crate::pubsub;

/// Applies a Pub/Sub command.
pub fn apply(session: &mut Session<'_>, cmd: Command<'_>, out: &mut Vec<u8>) {
    match cmd {
        Command::Subscribe(args) => pubsub::subscribe(session, args.from(1), false, out),
        Command::PSubscribe(args) => pubsub::subscribe(session, args.from(1), true, out),
        Command::Unsubscribe(args) => {
            pubsub::unsubscribe(session, args.from(1).collect(), false, out);
            session.info.handle.set_pubsub(pubsub::subscribed(session));
        }
        Command::PUnsubscribe(args) => {
            pubsub::unsubscribe(session, args.from(1).collect(), true, out);
            session.info.handle.set_pubsub(pubsub::subscribed(session));
        }
        Command::Publish(channel, message) => {
            let n = session.fe.shared.pubsub.publish(channel, message);
            Reply::new(out, session.proto).integer(n);
        }
        Command::PubsubChannels(_) | Command::PubsubNumsub(_) | Command::PubsubNumpat => {
            introspect(&session.fe.shared.pubsub, cmd, session.proto, out);
        }
        Command::PubsubHelp => {
            let lines: &[&[u8]] = &[
                b"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                b"CHANNELS [<pattern>]",
                b"    Return the currently active channels matching a <pattern> (default: '*').",
                b"NUMPAT",
                b"    Return number of subscriptions to patterns.",
                b"NUMSUB [<channel> ...]",
                b"    Return the number of subscribers for the specified channels, excluding",
                b"    pattern subscriptions(default: no channels).",
                b"HELP",
                b"    Prints this help.",
            ];
            let mut r = Reply::new(out, session.proto);
            r.array_len(lines.len());
            for l in lines {
                r.simple(l);
            }
        }
        _ => unreachable!("not a Pub/Sub command"),
    }
}

/// `PUBSUB CHANNELS|NUMSUB|NUMPAT`: they read the hub only (a script calls them too).
pub fn introspect(hub: &pubsub::Hub, cmd: Command<'_>, proto: Protocol, out: &mut Vec<u8>) {
    match cmd {
        Command::PubsubChannels(pattern) => {
            let channels = hub.channels(pattern);
            let mut r = Reply::new(out, proto);
            r.array_len(channels.len());
            for c in &channels {
                r.bulk(c);
            }
        }
        Command::PubsubNumsub(args) => {
            let mut r = Reply::new(out, proto);
            // A flat array in RESP3 too: Redis 7.0 (`src/pubsub.c`); the map came in 7.2.
            r.array_len((args.len() - 2) * 2);
            for c in args.from(2) {
                let count = hub.numsub(c);
                r.bulk(c).integer(count as i64);
            }
        }
        Command::PubsubNumpat => {
            Reply::new(out, proto).integer(hub.numpat() as i64);
        }
        _ => {}
    }
}
