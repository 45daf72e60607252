//! `SLOWLOG` and `LATENCY`, answered as a Redis 7.0.15 that has recorded nothing: manifold
//! keeps no slow log nor latency samples of its own (its figures are `INFO commandstats`,
//! the admin port's `SHOW REDIS STAGES` and `/metrics`), so `SLOWLOG GET` is empty, `LEN` 0,
//! `LATENCY LATEST` empty and `DOCTOR` says no spike was seen. The arguments are checked
//! as Redis checks them.

use manifold_redis_proto::Reply;

use super::Session;
use crate::cmd::{parse_i64, Args};

const SLOWLOG_HELP: [&str; 12] = [
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
];

const LATENCY_HELP: [&str; 17] = [
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Prints this help.",
];

/// What `LATENCY DOCTOR` says while `latency-monitor-threshold` is 0 (Redis's words).
const MONITOR_OFF: &[u8] = b"I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n";

/// What `LATENCY DOCTOR` says when nothing was sampled (Redis's words).
const NO_SPIKE: &[u8] = b"Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n";

fn help(r: &mut Reply<'_>, lines: &[&str]) {
    r.array_len(lines.len());
    for line in lines {
        r.simple(line.as_bytes());
    }
}

/// `name`: the subcommand's full name (`slowlog|get`).
pub fn apply(session: &Session<'_>, name: &str, args: Args<'_>, out: &mut Vec<u8>) {
    let mut r = Reply::new(out, session.proto);
    match name {
        "slowlog|get" => {
            if args.len() > 3 {
                let mut text = b"unknown subcommand or wrong number of arguments for '".to_vec();
                text.extend_from_slice(args.get(1));
                text.extend_from_slice(b"'. Try SLOWLOG HELP.");
                r.error(&text);
                return;
            }
            if args.len() == 3 && parse_i64(args.get(2)).is_none_or(|n| n < -1) {
                r.error(b"count should be greater than or equal to -1");
                return;
            }
            r.array_len(0);
        }
        "slowlog|reset" => {
            r.simple(b"OK");
        }
        "slowlog|help" => help(&mut r, &SLOWLOG_HELP),
        "latency|latest" | "latency|history" => {
            r.array_len(0);
        }
        // Nothing recorded: nothing reset.
        "slowlog|len" | "latency|reset" => {
            r.integer(0);
        }
        "latency|doctor" => {
            let on = session.fe.shared.settings.latency_monitor_threshold() > 0;
            r.verbatim(b"txt", if on { NO_SPIKE } else { MONITOR_OFF });
        }
        "latency|graph" => {
            let mut text = b"No samples available for event '".to_vec();
            text.extend_from_slice(args.get(2));
            text.push(b'\'');
            r.error(&text);
        }
        _ => help(&mut r, &LATENCY_HELP),
    }
}
