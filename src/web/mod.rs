//! `loopx web`: the owner's web face, for deciding gates from a phone. It parses requests,
//! calls the device flows, and shows; every decision is signed by a device the owner enrolled.

mod api;
mod assets;
mod auth;
mod error;
mod events;
mod guard;
mod net;
mod project;
mod view;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::kernel::{Code, Error, Result};

pub use project::Opener;

/// The most event streams one server keeps open.
pub const MAX_STREAMS: usize = 64;
/// The most connections one server serves at once.
pub const MAX_CONNECTIONS: usize = 512;
/// The most bytes of a request's body.
pub const MAX_BODY: usize = 16 * 1024;

/// How `loopx web` serves: where it listens, its TLS files, the projects.
pub struct Options {
    /// The address and port to listen on.
    pub listen: SocketAddr,
    /// The certificate chain and key (PEM) for HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The URL a phone opens, when it is not the listen address (a tunnel or a proxy).
    pub public_url: Option<String>,
    /// The projects served, each by its name and how to open its store.
    pub projects: Vec<(String, Opener)>,
    /// The pairing channel's directory (`runtime::pairing::dir`).
    pub pairing_dir: Option<PathBuf>,
    /// Called once the server listens, with its base URL.
    pub on_listen: Box<dyn FnOnce(&str) + Send>,
}

/// What every request handler shares.
pub struct App {
    /// The projects, by name.
    pub projects: Vec<project::Project>,
    /// Challenges and sessions.
    pub auth: auth::Auth,
    /// The Host values accepted and the page's origins.
    pub guard: guard::Guard,
    /// The pairing channel's directory.
    pub pairing_dir: Option<PathBuf>,
    /// True when the page is served over HTTPS (TLS here, or an `https` public URL): the
    /// session cookie is `Secure`.
    pub secure: bool,
    /// The open event streams.
    pub streams: Arc<tokio::sync::Semaphore>,
}

impl App {
    /// The project named `name`.
    pub fn project(&self, name: &str) -> Option<&project::Project> {
        self.projects.iter().find(|p| p.name == name)
    }
}

/// Refuses to listen on a non-loopback address without TLS: browsers give WebCrypto only to
/// secure contexts.
pub fn check_listen(listen: &SocketAddr, tls: bool) -> Result<()> {
    if tls || listen.ip().is_loopback() {
        return Ok(());
    }
    Err(Error::usage(format!(
        "not listening on {listen} without TLS: a phone's browser signs only on a secure page (HTTPS or localhost)"
    ))
    .hint("give --tls-cert and --tls-key, or keep 127.0.0.1 and reach it through an SSH tunnel (ssh -L 7878:127.0.0.1:7878 HOST)"))
}

/// Serves until interrupted (Ctrl-C or SIGTERM).
pub fn serve(opts: Options) -> Result<()> {
    check_listen(&opts.listen, opts.tls.is_some())?;
    let tls = opts
        .tls
        .as_ref()
        .map(|(c, k)| net::tls_config(c, k))
        .transpose()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::new(Code::Io, format!("cannot start the web server: {e}")))?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(opts.listen)
            .await
            .map_err(|e| Error::new(Code::Io, format!("cannot listen on {}: {e}", opts.listen)))?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::new(Code::Io, e.to_string()))?;
        let base = base_url(&local, tls.is_some());
        let projects = open_all(opts.projects)?;
        let app = Arc::new(App {
            projects,
            auth: auth::Auth::default(),
            guard: guard::Guard::new(&local, opts.public_url.as_deref(), tls.is_some())?,
            pairing_dir: opts.pairing_dir,
            secure: tls.is_some()
                || opts
                    .public_url
                    .as_deref()
                    .is_some_and(|u| u.starts_with("https://")),
            streams: Arc::new(tokio::sync::Semaphore::new(MAX_STREAMS)),
        });
        let shown = opts.public_url.clone().unwrap_or(base);
        (opts.on_listen)(&shown);
        net::run(listener, tls, api::router(app)).await;
        Ok(())
    })
}

/// Opens every project; with several, one that cannot be opened is left out, saying why.
fn open_all(list: Vec<(String, Opener)>) -> Result<Vec<project::Project>> {
    let several = list.len() > 1;
    let mut out = Vec::new();
    for (name, open) in list {
        match project::Project::start(name.clone(), open) {
            Ok(p) => out.push(p),
            Err(e) if several => eprintln!(
                "loopx web: leaving out {}: {}",
                crate::text::escape(&name),
                crate::text::escape(&e.message)
            ),
            Err(e) => return Err(e),
        }
    }
    if out.is_empty() {
        return Err(Error::usage("no project of the list could be opened"));
    }
    Ok(out)
}

/// The server's own URL: `http://127.0.0.1:7878`.
fn base_url(local: &SocketAddr, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://{local}")
}
