//! Length-prefixed bincode frames. CONTRACT (implementation pending in issue 3).
