//! Revelation (Scheme A/B) and the calling context tree builder.
pub mod pattern;
