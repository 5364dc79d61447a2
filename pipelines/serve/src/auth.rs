//! Who may write: `ReportMatch` and the queue calls need the service's bearer token (the
//! `authorization: Bearer <token>` metadata), compared in constant time; read calls (`Score`,
//! `Pair`, `Explain`) are open unless `auth_reads`. A refused call gets `UNAUTHENTICATED`.

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
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("reads", &self.reads)
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
    /// Whether the call may go on.
    ///
    /// # Errors
    /// `UNAUTHENTICATED` when a token is needed and the call's is missing or wrong.
    pub fn check(&self, md: &MetadataMap, access: Access) -> Result<(), Status> {
        let Some(want) = &self.token else {
            return Ok(());
        };
        if access == Access::Read && !self.reads {
            return Ok(());
        }
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
        };
        assert!(a.check(&md(Some("Bearer s3cret")), Access::Write).is_ok());
        for bad in [
            None,
            Some("Bearer s3cre"),
            Some("Bearer s3cret2"),
            Some("s3cret"),
        ] {
            let e = a.check(&md(bad), Access::Write).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{bad:?}");
        }
        assert!(a.check(&md(None), Access::Read).is_ok());
        let strict = Auth {
            reads: true,
            ..a.clone()
        };
        assert!(strict.check(&md(None), Access::Read).is_err());
        assert!(Auth::default().check(&md(None), Access::Write).is_ok());
    }
}
