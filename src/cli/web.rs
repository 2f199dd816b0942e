//! `loopx web`: the owner's web face for one project or every project of the list, and
//! `loopx web pair` (in `web_pair.rs`).

use std::io::Write as _;
use std::net::SocketAddr;

use serde_json::json;

use super::args::WebArgs;
use super::{Ctx, Out, projects};
use crate::kernel::{Error, Result};
use crate::runtime::pairing;
use crate::store::owner::KeyAt;
use crate::web::{self, Opener};

/// Runs `loopx web` until Ctrl-C or SIGTERM.
pub fn serve(ctx: &Ctx, a: WebArgs) -> Result<Out> {
    let listen: SocketAddr = a.listen.parse().map_err(|_| {
        Error::usage(format!("--listen {} is not ADDR:PORT", a.listen))
            .hint("for example: --listen 127.0.0.1:7878")
    })?;
    web::check_listen(&listen, a.tls_cert.is_some())?;
    // This process never signs as the owner, whatever key the environment points at.
    let ctx = Ctx {
        key: KeyAt::Forbidden,
        ..ctx.clone()
    };
    let projects = if a.all {
        every(&ctx)?
    } else {
        vec![one(&ctx)?]
    };
    let dir = pairing::dir(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"));
    if listen.ip().is_unspecified() && a.public_url.is_none() {
        eprintln!(
            "note: listening on every address; give --public-url with the address a phone opens, so `loopx web pair` links to it"
        );
    }
    let (json, shown) = (ctx.json, dir.clone());
    let on_listen = Box::new(move |url: &str| {
        if let Some(d) = &shown {
            let _ = pairing::announce(d, url);
        }
        let line = match json {
            true => json!({"url": url}).to_string(),
            false => format!("loopx web: {url} (pair a phone: loopx web pair; Ctrl-C stops)"),
        };
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    });
    let r = web::serve(web::Options {
        listen,
        tls: a.tls_cert.zip(a.tls_key),
        public_url: a.public_url,
        projects,
        pairing_dir: dir.clone(),
        on_listen,
    });
    if let Some(d) = &dir {
        pairing::retire(d);
    }
    r.map(|()| Out::default())
}

/// The project of `--dir` (or here), named by its directory.
fn one(ctx: &Ctx) -> Result<(String, Opener)> {
    let store = ctx.open()?;
    let name = store
        .local_root()
        .and_then(|r| r.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "project".into());
    drop(store);
    let ctx = ctx.clone();
    Ok((name, Box::new(move || ctx.open())))
}

/// Every project of the owner's list.
fn every(ctx: &Ctx) -> Result<Vec<(String, Opener)>> {
    let file = projects::list_path(ctx)?;
    let entries = crate::store::projects::read(&file)?.projects;
    if entries.is_empty() {
        return Err(Error::usage("the list of projects is empty")
            .hint("add one: loopx projects add ~/work/PROJECT"));
    }
    let env = ctx.env();
    Ok(entries
        .into_iter()
        .map(|e| {
            let (env, cwd) = (env.clone(), ctx.cwd.clone());
            let name = e.name.clone();
            let open: Opener = Box::new(move || crate::board::overview::open_entry(&e, &env, &cwd));
            (name, open)
        })
        .collect())
}
