//! The web face's connections: accepted up to a bound, TLS when asked (rustls with `ring`),
//! HTTP/1.1 through hyper with a deadline on each request's headers.

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, pki_types::pem::PemObject};

use crate::kernel::{Code, Error, Result};

/// How long a client has to send a request's headers, and to finish a TLS handshake.
const HEADER_WAIT: Duration = Duration::from_secs(10);

/// The server's TLS setup from a PEM certificate chain and its PEM private key.
pub fn tls_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>> {
    let bad = |what: &str, p: &Path, e: String| {
        Error::usage(format!("{what} {}: {e}", p.display()))
            .hint("give PEM files: --tls-cert fullchain.pem --tls-key privkey.pem")
    };
    let certs = rustls::pki_types::CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| bad("cannot read the certificate", cert, e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no certificate in", cert, "empty".into()));
    }
    let key_der = rustls::pki_types::PrivateKeyDer::from_pem_file(key)
        .map_err(|e| bad("cannot read the key", key, e.to_string()))?;
    // `ring`, not aws-lc-rs (which needs cmake to build); rustls marks it deprecated only for
    // lacking post-quantum key exchange.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::new(Code::Internal, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| bad("the key does not fit the certificate", key, e.to_string()))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// A connection holding its place among the bounded ones until it closes.
struct Held<S> {
    io: S,
    _permit: OwnedSemaphorePermit,
}

impl<S: AsyncRead + Unpin> AsyncRead for Held<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Held<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Accepts connections (at most [`super::MAX_CONNECTIONS`] at once) until Ctrl-C or SIGTERM.
pub async fn run(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    router: axum::Router,
) {
    let slots = Arc::new(Semaphore::new(super::MAX_CONNECTIONS));
    let tls = tls.map(TlsAcceptor::from);
    let stop = stopped();
    tokio::pin!(stop);
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let (tcp, _) = tokio::select! {
            _ = &mut stop => return,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(_) => {
                    // Out of descriptors or a reset before accept: wait, then go on.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let (router, tls) = (router.clone(), tls.clone());
        tokio::spawn(async move {
            match tls {
                None => {
                    serve_one(
                        Held {
                            io: tcp,
                            _permit: permit,
                        },
                        router,
                    )
                    .await
                }
                Some(acc) => {
                    if let Ok(Ok(s)) = tokio::time::timeout(HEADER_WAIT, acc.accept(tcp)).await {
                        serve_one(
                            Held {
                                io: s,
                                _permit: permit,
                            },
                            router,
                        )
                        .await;
                    }
                }
            }
        });
    }
}

/// Serves one connection's requests.
async fn serve_one<S>(io: S, router: axum::Router)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = TowerToHyperService::new(router);
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_WAIT)
        .max_buf_size(64 * 1024)
        .serve_connection(TokioIo::new(io), svc)
        .await;
}

/// Resolves on Ctrl-C or SIGTERM.
async fn stopped() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term => {},
    }
}
