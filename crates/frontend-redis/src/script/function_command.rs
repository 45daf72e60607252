//! `FUNCTION LOAD|DELETE|FLUSH|LIST|STATS|KILL|HELP|DUMP|RESTORE` and the script an `FCALL`
//! runs, with Redis 7.0's texts. The libraries are kept in `redis_function`
//! ([`super::functions`]); a change is made there in its own SQL transaction and kept in
//! this manifold's memory once committed.

use manifold_redis_proto::Reply;

use super::functions::{self, Change};
use super::{parse_eval, Script};
use crate::cmd::{parse_i64, Args};
use crate::session::Session;
use crate::store::{StoreError, Tx};

impl Script {
    /// The script `FCALL`/`FCALL_RO` `args` run; `Err`: Redis's error text.
    pub(super) fn function(
        session: &Session<'_>,
        args: Args<'_>,
        ro: bool,
    ) -> Result<Self, Vec<u8>> {
        let libs = &session.fe.shared.scripts.functions;
        let Some(found) = libs.find(args.get(1)) else {
            return Err(b"Function not found".to_vec());
        };
        if parse_i64(args.get(2)).is_none() {
            return Err(b"Bad number of keys provided".to_vec());
        }
        let parsed = parse_eval(args).map_err(<[u8]>::to_vec)?;
        if ro && !found.no_writes {
            return Err(b"Can not execute a script with write flag using *_ro command.".to_vec());
        }
        // The library's one script finds the function by the name its first argument
        // gives (see `functions::wrapper`).
        let mut argv = Vec::with_capacity(parsed.argv.len() + 1);
        argv.push(args.get(1).to_vec());
        argv.extend(parsed.argv.iter().map(|a| a.to_vec()));
        Ok(Script {
            sha: found.sha,
            source: found.script,
            keys: parsed.keys.iter().map(|k| k.to_vec()).collect(),
            argv,
            read_only: ro || found.no_writes,
            // Not put in the script cache.
            by_sha: true,
            function: Some(String::from_utf8_lossy(args.get(1)).into_owned()),
        })
    }
}

/// Before an `FCALL` of a function this manifold does not know: the libraries are read
/// again (on a transaction of their own), in case another manifold loaded it; `Err`: the
/// error reply's text.
pub async fn learn(session: &Session<'_>, name: &[u8]) -> Result<(), Vec<u8>> {
    let libs = &session.fe.shared.scripts.functions;
    if libs.has_function(name) {
        return Ok(());
    }
    with_tx(session, false, async |tx: &mut Tx<'_>| {
        libs.refresh(tx).await.map(Ok)
    })
    .await
}

/// Runs `work` on a transaction of the client's login (`write`: one that commits).
async fn with_tx<T>(
    session: &Session<'_>,
    write: bool,
    work: impl AsyncFnOnce(&mut Tx<'_>) -> Result<Result<T, String>, StoreError>,
) -> Result<T, Vec<u8>> {
    let Some(login) = session.login.clone() else {
        return Err(b"manifold: no backend login for this client".to_vec());
    };
    let mut tx = session
        .fe
        .worker
        .begin(&login, write)
        .noting(&session.causal);
    match work(&mut tx).await {
        Ok(Ok(done)) => match tx.commit().await {
            Ok(()) => Ok(done),
            Err(e) => Err(e.reply_text()),
        },
        Ok(Err(text)) => {
            tx.abandon();
            Err(text.into_bytes())
        }
        Err(e) => {
            tx.abandon();
            Err(e.reply_text())
        }
    }
}

/// `FUNCTION ...` but `KILL`'s running script, with Redis 7.0's texts.
pub async fn function_command(
    session: &Session<'_>,
    name: &str,
    args: Args<'_>,
    out: &mut Vec<u8>,
) {
    let proto = session.proto;
    let scripts = &session.fe.shared.scripts;
    let libs = &scripts.functions;
    let change = match name {
        "function|load" => {
            // `functionLoadCommand`: every argument before the code is `REPLACE` (any
            // number of times).
            let code = args.get(args.len() - 1);
            if let Some(bad) =
                (2..args.len() - 1).find(|&i| !args.get(i).eq_ignore_ascii_case(b"replace"))
            {
                let bad = String::from_utf8_lossy(args.get(bad));
                let text = format!("Unknown option given: {bad}");
                Reply::new(out, proto).error(text.as_bytes());
                return;
            }
            let replace = args.len() > 3;
            let name = match functions::checked_name(code) {
                Ok(name) => name,
                Err(text) => {
                    Reply::new(out, proto).error(text.as_bytes());
                    return;
                }
            };
            // Redis's order: an existing library is refused before its code runs (checked
            // again, on the table, when the change is made).
            if !replace && libs.has(&name) {
                let text = format!("Library '{name}' already exists");
                Reply::new(out, proto).error(text.as_bytes());
                return;
            }
            let owned = code.to_vec();
            let registered = scripts
                .off_thread(move || functions::register(&owned).map(|f| (owned, f)))
                .await
                .unwrap_or_else(|| Err("manifold: the library could not be run".into()));
            match registered {
                Ok((code, functions)) => Change::Load {
                    name,
                    code,
                    functions,
                    replace,
                },
                Err(text) => {
                    Reply::new(out, proto).error(text.as_bytes());
                    return;
                }
            }
        }
        "function|delete" => Change::Delete(args.get(2).to_vec()),
        "function|flush" => {
            let mode = args.get(2);
            if args.len() > 3 {
                subcommand_syntax_error(args, Reply::new(out, proto));
                return;
            }
            if args.len() == 3
                && !mode.eq_ignore_ascii_case(b"sync")
                && !mode.eq_ignore_ascii_case(b"async")
            {
                Reply::new(out, proto).error(b"FUNCTION FLUSH only supports SYNC|ASYNC option");
                return;
            }
            Change::Flush
        }
        "function|restore" => {
            // Redis's order: the arguments, the policy, then the payload's footer.
            if args.len() > 4 {
                subcommand_syntax_error(args, Reply::new(out, proto));
                return;
            }
            let policy = if args.len() == 3 {
                functions::Policy::Append
            } else {
                let p = args.get(3);
                if p.eq_ignore_ascii_case(b"append") {
                    functions::Policy::Append
                } else if p.eq_ignore_ascii_case(b"replace") {
                    functions::Policy::Replace
                } else if p.eq_ignore_ascii_case(b"flush") {
                    functions::Policy::Flush
                } else {
                    Reply::new(out, proto).error(
                        b"Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
                    );
                    return;
                }
            };
            if let Err(e) = crate::cmd::keys::rdb::verify(args.get(2)) {
                Reply::new(out, proto).error(e.text());
                return;
            }
            // Decoded and each library run off the async threads (at most
            // `proto-max-bulk-len` of payload).
            let payload = args.get(2).to_vec();
            let restored = scripts
                .off_thread(move || functions::restored(&payload))
                .await
                .unwrap_or_else(|| Err("manifold: the libraries could not be run".into()));
            match restored {
                Ok(libraries) => Change::Restore { libraries, policy },
                Err(text) => {
                    Reply::new(out, proto).error(text.as_bytes());
                    return;
                }
            }
        }
        "function|list" | "function|stats" | "function|dump" => {
            // Shown as the table has them: another manifold may have changed them.
            if let Err(text) = with_tx(session, false, async |tx: &mut Tx<'_>| {
                libs.refresh(tx).await.map(Ok)
            })
            .await
            {
                Reply::new(out, proto).error(&text);
                return;
            }
            if name == "function|dump" {
                let all = libs.list(None);
                let payload =
                    crate::cmd::keys::rdb::functions_payload(all.iter().map(|(_, l)| &l.code[..]));
                Reply::new(out, proto).bulk(&payload);
            } else if name == "function|list" {
                list(libs, args, Reply::new(out, proto));
            } else {
                stats(libs, Reply::new(out, proto));
            }
            return;
        }
        "function|kill" => {
            let mut r = Reply::new(out, proto);
            if scripts.kill_all() {
                r.simple(b"OK");
            } else {
                r.error(b"-NOTBUSY No scripts in execution right now.");
            }
            return;
        }
        _ => {
            let mut r = Reply::new(out, proto);
            r.array_len(functions::HELP.len());
            for line in functions::HELP {
                r.simple(line.as_bytes());
            }
            return;
        }
    };
    let made = with_tx(session, true, async |tx: &mut Tx<'_>| {
        libs.change(tx, change).await
    })
    .await;
    let mut r = Reply::new(out, proto);
    match made {
        Ok((installable, reply)) => {
            libs.install(installable);
            match reply {
                Some(name) => r.bulk(name.as_bytes()),
                None => r.simple(b"OK"),
            };
        }
        Err(text) => {
            r.error(&text);
        }
    }
}

/// Redis's `addReplySubcommandSyntaxError`: the subcommand as the client wrote it.
fn subcommand_syntax_error(args: Args<'_>, mut r: Reply<'_>) {
    let text = format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        String::from_utf8_lossy(args.get(1)),
        String::from_utf8_lossy(args.get(0)).to_ascii_uppercase()
    );
    r.error(text.as_bytes());
}

/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`, as `functionListCommand`: each option
/// once (given again, it is an unknown argument), the pattern matched with no regard to
/// case.
fn list(libs: &functions::Libraries, args: Args<'_>, mut r: Reply<'_>) {
    let mut with_code = false;
    let mut pattern = None;
    let mut i = 2;
    while i < args.len() {
        let a = args.get(i);
        if !with_code && a.eq_ignore_ascii_case(b"withcode") {
            with_code = true;
        } else if pattern.is_none() && a.eq_ignore_ascii_case(b"libraryname") {
            if i + 1 >= args.len() {
                r.error(b"library name argument was not given");
                return;
            }
            i += 1;
            pattern = Some(args.get(i));
        } else {
            let bad = String::from_utf8_lossy(a);
            r.error(format!("Unknown argument {bad}").as_bytes());
            return;
        }
        i += 1;
    }
    let list = libs.list(pattern);
    r.array_len(list.len());
    for (name, lib) in list {
        r.map_len(if with_code { 4 } else { 3 });
        r.bulk(b"library_name");
        r.bulk(name.as_bytes());
        r.bulk(b"engine");
        r.bulk(b"LUA");
        r.bulk(b"functions");
        r.array_len(lib.functions.len());
        for f in &lib.functions {
            r.map_len(3);
            r.bulk(b"name");
            r.bulk(f.name.as_bytes());
            r.bulk(b"description");
            r.null();
            r.bulk(b"flags");
            r.set_len(usize::from(f.no_writes));
            if f.no_writes {
                r.simple(b"no-writes");
            }
        }
        if with_code {
            r.bulk(b"library_code");
            r.bulk(&lib.code);
        }
    }
}

/// `FUNCTION STATS`.
fn stats(libs: &functions::Libraries, mut r: Reply<'_>) {
    let (libraries, functions) = libs.counts();
    r.map_len(2);
    r.bulk(b"running_script");
    r.null();
    r.bulk(b"engines");
    r.map_len(1);
    r.bulk(b"LUA");
    r.map_len(2);
    r.bulk(b"libraries_count");
    r.integer(libraries as i64);
    r.bulk(b"functions_count");
    r.integer(functions as i64);
}
