//! OpenFlow over TLS (`pssl:` listeners, `ssl:` controllers), as OVS
//! runs it: both ends present a certificate signed by the one CA in the
//! config (`[openflow] ssl_ca_certificate`), and both check the other's
//! chain against it. Like OVS, the switch does not match a controller's
//! certificate to the address it dialled: the CA is the trust anchor, and
//! the peer's chain must lead to it.
//!
//! A TLS connection is one [`rustls::Connection`] shared by the thread
//! reading requests and the one writing replies (`crate::listen`): each
//! holds the lock only while it hands bytes to or takes them from rustls
//! and writes what rustls has to send; socket reads happen outside it.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The key, certificate and CA certificate files (PEM).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub private_key: PathBuf,
    pub certificate: PathBuf,
    pub ca_certificate: PathBuf,
}

/// Both sides' configurations, built once from [`TlsFiles`].
#[derive(Clone, Debug)]
pub struct TlsConfig {
    pub server: Arc<rustls::ServerConfig>,
    pub client: Arc<rustls::ClientConfig>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn bad(path: &Path, what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}: {e}", path.display()),
    )
}

impl TlsConfig {
    /// Reads the files and builds the configurations; every error names
    /// the file.
    pub fn load(files: &TlsFiles) -> io::Result<TlsConfig> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.certificate)
            .map_err(|e| bad(&files.certificate, "certificate", e))?
            .collect::<Result<_, _>>()
            .map_err(|e| bad(&files.certificate, "certificate", e))?;
        if chain.is_empty() {
            return Err(bad(
                &files.certificate,
                "certificate",
                "no certificate in the file",
            ));
        }
        let key = PrivateKeyDer::from_pem_file(&files.private_key)
            .map_err(|e| bad(&files.private_key, "private key", e))?;
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(&files.ca_certificate)
            .map_err(|e| bad(&files.ca_certificate, "CA certificate", e))?
        {
            let c = c.map_err(|e| bad(&files.ca_certificate, "CA certificate", e))?;
            roots
                .add(c)
                .map_err(|e| bad(&files.ca_certificate, "CA certificate", e))?;
        }
        if roots.is_empty() {
            return Err(bad(
                &files.ca_certificate,
                "CA certificate",
                "no certificate in the file",
            ));
        }
        let roots = Arc::new(roots);
        let clients =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
                .build()
                .map_err(|e| bad(&files.ca_certificate, "CA certificate", e))?;
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(&files.certificate, "TLS", e))?
            .with_client_cert_verifier(clients)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| bad(&files.private_key, "key and certificate", e))?;
        let servers =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider())
                .build()
                .map_err(|e| bad(&files.ca_certificate, "CA certificate", e))?;
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(&files.certificate, "TLS", e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(servers)))
            .with_client_auth_cert(chain, key)
            .map_err(|e| bad(&files.private_key, "key and certificate", e))?;
        Ok(TlsConfig {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }
}

/// A controller's certificate must chain to the CA; the address it was
/// reached at is not looked for in it (OVS's rule, see the module doc).
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// One end of a TLS connection: this thread's socket handle and the
/// shared session.
pub(crate) struct TlsStream {
    sock: TcpStream,
    session: Arc<Mutex<rustls::Connection>>,
}

fn tls_err(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl TlsStream {
    /// The switch's side of an accepted connection.
    pub fn server(sock: TcpStream, cfg: &TlsConfig) -> io::Result<TlsStream> {
        let c = rustls::ServerConnection::new(cfg.server.clone()).map_err(tls_err)?;
        Ok(TlsStream {
            sock,
            session: Arc::new(Mutex::new(c.into())),
        })
    }

    /// The switch's side of a connection to a controller at `ip`.
    pub fn client(sock: TcpStream, ip: std::net::IpAddr, cfg: &TlsConfig) -> io::Result<TlsStream> {
        let name = ServerName::IpAddress(ip.into());
        let c = rustls::ClientConnection::new(cfg.client.clone(), name).map_err(tls_err)?;
        Ok(TlsStream {
            sock,
            session: Arc::new(Mutex::new(c.into())),
        })
    }

    pub fn try_clone(&self) -> io::Result<TlsStream> {
        Ok(TlsStream {
            sock: self.sock.try_clone()?,
            session: self.session.clone(),
        })
    }

    pub fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// Writes whatever rustls has to send (under the caller's lock).
    fn flush_tls(c: &mut rustls::Connection, mut sock: &TcpStream) -> io::Result<()> {
        while c.wants_write() {
            c.write_tls(&mut sock)?;
        }
        Ok(())
    }
}

impl Read for TlsStream {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let mut buf = [0u8; 16 * 1024];
        loop {
            {
                let mut c = crate::agent::lock(&self.session);
                match c.reader().read(out) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                Self::flush_tls(&mut c, &self.sock)?;
            }
            // Outside the lock: the writing thread goes on meanwhile.
            let n = (&self.sock).read(&mut buf)?;
            if n == 0 {
                return Ok(0);
            }
            let mut c = crate::agent::lock(&self.session);
            let mut rest = &buf[..n];
            while !rest.is_empty() {
                c.read_tls(&mut rest)?;
                c.process_new_packets().map_err(tls_err)?;
            }
            Self::flush_tls(&mut c, &self.sock)?;
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let mut c = crate::agent::lock(&self.session);
        c.writer().write_all(data)?;
        Self::flush_tls(&mut c, &self.sock)?;
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut c = crate::agent::lock(&self.session);
        Self::flush_tls(&mut c, &self.sock)
    }
}
