//! Pub/Sub commands: `SUBSCRIBE`, `PSUBSCRIBE`, `UNSUBSCRIBE`, `PUNSUBSCRIBE`, `PUBLISH`,
//! `PUBSUB CHANNELS|NUMSUB|NUMPAT|HELP` (the hub is [`crate::pubsub`]).

use manifold_redis_proto::Reply;

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
        Command::PubsubChannels(pattern) => {
            let channels = session.fe.shared.pubsub.channels(pattern);
            let mut r = Reply::new(out, session.proto);
            r.array_len(channels.len());
            for c in &channels {
                r.bulk(c);
            }
        }
        Command::PubsubNumsub(args) => {
            let mut r = Reply::new(out, session.proto);
            // A flat array in RESP3 too: Redis 7.0 (`src/pubsub.c`); the map came in 7.2.
            r.array_len((args.len() - 2) * 2);
            for c in args.from(2) {
                let count = session.fe.shared.pubsub.numsub(c);
                r.bulk(c).integer(count as i64);
            }
        }
        Command::PubsubNumpat => {
            let n = session.fe.shared.pubsub.numpat();
            Reply::new(out, session.proto).integer(n as i64);
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
