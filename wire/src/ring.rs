//! Shared-memory event ring. CONTRACT (implementation pending in issue 3).
