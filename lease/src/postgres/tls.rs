//! TLS to PostgreSQL as libpq means it ([`SslMode`], `sslrootcert=`), with rustls (the `ring`
//! provider): the settings, the certificate check each mode makes, and the rustls error
//! inside a failed connection.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

/// `sslmode=` of a `postgres://` URI, as libpq spells and means it.
///
/// | mode | encrypted | certificate checked |
/// |---|---|---|
/// | `disable` | never | - |
/// | `prefer` (default) | if the server offers TLS, else plain | only with `sslrootcert` (as `verify-ca`) |
/// | `require` | always: refused if the server offers no TLS | only with `sslrootcert` (as `verify-ca`) |
/// | `verify-ca` | always | chain against `sslrootcert` |
/// | `verify-full` | always | chain against `sslrootcert`, and the host name |
///
/// Without `sslrootcert`, `~/.postgresql/root.crt` is used when it exists (libpq's default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// No TLS.
    Disable,
    /// TLS if the server offers it (and plain if the TLS handshake fails, as libpq does).
    #[default]
    Prefer,
    /// TLS or nothing, without checking the certificate (unless `sslrootcert` is given).
    Require,
    /// TLS, with the certificate chain checked against `sslrootcert`.
    VerifyCa,
    /// TLS, with the certificate chain and the host name checked.
    VerifyFull,
}

impl SslMode {
    /// The mode libpq spells `text`.
    pub fn parse(text: &str) -> Option<SslMode> {
        Some(match text {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// As libpq spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// The TLS settings of a `postgres://` coordinator: [`SslMode`] and the CA certificates.
#[derive(Clone)]
pub(crate) struct PgTls {
    pub(super) mode: SslMode,
    pub(super) root_cert: Option<PathBuf>,
    pub(super) connector: MakeRustlsConnect,
}

impl std::fmt::Debug for PgTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTls")
            .field("mode", &self.mode)
            .field("root_cert", &self.root_cert)
            .finish_non_exhaustive()
    }
}

/// How far a certificate is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Encryption only (the handshake's signatures are still checked).
    Nothing,
    /// The chain against the CA certificates.
    Chain,
    /// The chain and the host name.
    Full,
}

impl PgTls {
    /// The settings for `mode`, with the CA certificates of `root_cert` (a PEM file): given,
    /// or `~/.postgresql/root.crt` if it exists. The error says what is wrong, for
    /// `INVALID_URI`.
    pub fn new(mode: SslMode, root_cert: Option<&Path>) -> Result<PgTls, String> {
        let root_cert = match root_cert {
            Some(path) if path == Path::new("system") => {
                return Err("sslrootcert=system is not supported: give the CA file (PEM)".into())
            }
            Some(path) => Some(path.to_owned()),
            None => std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".postgresql/root.crt"))
                .filter(|path| path.is_file()),
        };
        let check = match (mode, &root_cert) {
            (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
                return Err(format!(
                    "sslmode={} checks the server's certificate: give sslrootcert=FILE (the CA \
                     certificates, PEM)",
                    mode.as_str()
                ))
            }
            (SslMode::VerifyFull, Some(_)) => Check::Full,
            (SslMode::Disable, _) | (SslMode::Prefer | SslMode::Require, None) => Check::Nothing,
            (_, Some(_)) => Check::Chain,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let algorithms = provider.signature_verification_algorithms;
        let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|error| format!("TLS: {error}"))?;
        let webpki = match (&root_cert, check) {
            (Some(path), Check::Chain | Check::Full) => {
                let mut roots = RootCertStore::empty();
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|error| {
                        format!("sslrootcert {}: cannot read it: {error}", path.display())
                    })?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(format!(
                        "sslrootcert {}: no CA certificate in it (expected PEM)",
                        path.display()
                    ));
                }
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|error| format!("sslrootcert {}: {error}", path.display()))?;
                Some(webpki)
            }
            _ => None,
        };
        let check = if webpki.is_some() {
            check
        } else {
            Check::Nothing
        };
        let config = builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Verifier {
                webpki,
                check,
                algorithms,
            }))
            .with_no_client_auth();
        Ok(PgTls {
            mode,
            root_cert: root_cert.filter(|_| check != Check::Nothing),
            connector: MakeRustlsConnect::new(config),
        })
    }
}

/// The certificate check of [`Check`]: webpki's, with the host-name part left out for
/// `verify-ca`, or none at all.
#[derive(Debug)]
struct Verifier {
    webpki: Option<Arc<WebPkiServerVerifier>>,
    check: Check,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(webpki) = self
            .webpki
            .as_ref()
            .filter(|_| self.check != Check::Nothing)
        else {
            return Ok(ServerCertVerified::assertion());
        };
        match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.check == Check::Chain => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The rustls error somewhere in `error`'s chain (tokio-rustls wraps it in an `io::Error`,
/// whose `source()` skips it).
pub(super) fn rustls_error<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(found) = error.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        if let Some(found) = error
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(found);
        }
        next = error.source();
    }
    None
}
