//! `loopx web`: the owner's web face for one project or every project of the list, and
//! `loopx web pair` (in `web_pair.rs`).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

use super::{Ctx, Out, projects};
use crate::kernel::{Error, Result};
use crate::runtime::pairing;
use crate::store::owner::KeyAt;
use crate::web::{self, Opener};

/// `loopx web`'s flags.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct WebArgs {
    /// `pair`: enroll a phone.
    #[command(subcommand)]
    pub cmd: Option<WebCmd>,
    /// Every project of `loopx projects list`.
    #[arg(long)]
    pub all: bool,
    /// The address and port to listen on (any but loopback needs --tls-cert and --tls-key).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:7878")]
    pub listen: SocketAddr,
    /// The certificate chain for HTTPS (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The URL a phone opens, when it is not the listen address (a tunnel or a proxy).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
}

/// `loopx web`'s subcommands.
#[derive(Debug, Subcommand)]
pub enum WebCmd {
    /// Enroll a phone: a one-time URL to open on it, then the owner confirms its fingerprint here.
    #[command(after_help = "Example:\n  loopx web pair --name phone")]
    Pair {
        /// The device's name (1 to 32 of a-z, 0-9 and -).
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// The server's base URL (default: the running `loopx web`'s).
        #[arg(long, value_name = "URL")]
        url: Option<String>,
    },
}

/// Runs `loopx web` or `loopx web pair`.
pub fn run(ctx: &Ctx, a: WebArgs) -> Result<Out> {
    if let Some(WebCmd::Pair { name, url }) = a.cmd {
        return super::web_pair::run(ctx, name, url, ctx.json);
    }
    web::check_listen(&a.listen, a.tls_cert.is_some())?;
    // This process never signs as the owner, whatever key the environment points at.
    let ctx = Ctx {
        key: KeyAt::Forbidden,
        ..ctx.clone()
    };
    let projects = if a.all { every(&ctx)? } else { vec![one(&ctx)?] };
    let dir = pairing::dir(
        std::env::var_os("XDG_STATE_HOME"),
        std::env::var_os("HOME"),
    );
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
        listen: a.listen,
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
            let open: Opener =
                Box::new(move || crate::board::overview::open_entry(&e, &env, &cwd));
            (name, open)
        })
        .collect())
}
