//! Who may write: `ReportMatch`, `ReportMatches` and the queue calls need a credential: the
//! service's bearer token (the `authorization: Bearer <token>` metadata, compared in constant
//! time) or, when the service asks for them (`--client-ca`), a client certificate the TLS
//! handshake verified. Read calls (`Score`, `Pair`, `Explain`) are open unless `auth_reads`. A
//! refused call gets `UNAUTHENTICATED`.

use subtle::ConstantTimeEq;
use tonic::Status;
use tonic::metadata::MetadataMap;

/// The credential the service asks for.
#[derive(Clone, Default)]
pub struct Auth {
    /// The bearer token; `None`: every call is allowed.
    pub token: Option<String>,
    /// Whether read calls need it too.
    pub reads: bool,
    /// Whether a verified client certificate is a credential (the server asks for them).
    pub client_certs: bool,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("reads", &self.reads)
            .field("client_certs", &self.client_certs)
            .finish()
    }
}

/// What a call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

impl Auth {
    /// Whether the call may go on; `verified_cert`: its connection presented a client
    /// certificate the TLS handshake verified against the service's CA.
    ///
    /// # Errors
    /// `UNAUTHENTICATED` when a credential is needed and the call has none (or a wrong token).
    pub fn check(
        &self,
        md: &MetadataMap,
        access: Access,
        verified_cert: bool,
    ) -> Result<(), Status> {
        if access == Access::Read && !self.reads {
            return Ok(());
        }
        if self.client_certs && verified_cert {
            return Ok(());
        }
        let Some(want) = &self.token else {
            return if self.client_certs {
                Err(Status::unauthenticated(
                    "this call needs a client certificate signed by the service's CA",
                ))
            } else {
                Ok(())
            };
        };
        let given = md
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .unwrap_or("");
        if bool::from(given.as_bytes().ct_eq(want.as_bytes())) {
            Ok(())
        } else {
            Err(Status::unauthenticated(
                "this call needs the service's token (metadata authorization: Bearer <token>)",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn writes_need_the_token_and_reads_only_when_asked() {
        let md = |v: Option<&str>| {
            let mut m = MetadataMap::new();
            if let Some(v) = v {
                m.insert("authorization", v.parse().unwrap());
            }
            m
        };
        let a = Auth {
            token: Some("s3cret".into()),
            reads: false,
            client_certs: false,
        };
        assert!(
            a.check(&md(Some("Bearer s3cret")), Access::Write, false)
                .is_ok()
        );
        for bad in [
            None,
            Some("Bearer s3cre"),
            Some("Bearer s3cret2"),
            Some("s3cret"),
        ] {
            let e = a.check(&md(bad), Access::Write, false).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{bad:?}");
        }
        assert!(a.check(&md(None), Access::Read, false).is_ok());
        let strict = Auth {
            reads: true,
            ..a.clone()
        };
        assert!(strict.check(&md(None), Access::Read, false).is_err());
        assert!(
            Auth::default()
                .check(&md(None), Access::Write, false)
                .is_ok()
        );
        // A certificate is a credential only where the service asks for them.
        assert!(a.check(&md(None), Access::Write, true).is_err());
        let certs = Auth {
            client_certs: true,
            ..a.clone()
        };
        assert!(certs.check(&md(None), Access::Write, true).is_ok());
        assert!(
            certs
                .check(&md(Some("Bearer s3cret")), Access::Write, false)
                .is_ok()
        );
        assert!(certs.check(&md(None), Access::Write, false).is_err());
        let certs_only = Auth {
            token: None,
            reads: false,
            client_certs: true,
        };
        assert!(certs_only.check(&md(None), Access::Write, true).is_ok());
        let e = certs_only.check(&md(Some("Bearer s3cret")), Access::Write, false);
        assert_eq!(e.unwrap_err().code(), tonic::Code::Unauthenticated);
        assert!(certs_only.check(&md(None), Access::Read, false).is_ok());
    }
}
