//! The crate's error type.

use core::fmt;

/// Why a buffer could not be viewed or parsed as a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header, or than a length field says.
    Truncated,
    /// A field holds a value this crate does not accept (bad version, length
    /// field smaller than the header, wrong checksum, unsupported address
    /// type, ...).
    Malformed,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => f.write_str("truncated packet"),
            Error::Malformed => f.write_str("malformed packet"),
        }
    }
}

impl core::error::Error for Error {}

/// Result type of this crate.
pub type Result<T> = core::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn error_display() {
        assert_eq!(Error::Truncated.to_string(), "truncated packet");
        assert_eq!(Error::Malformed.to_string(), "malformed packet");
        let e: &dyn core::error::Error = &Error::Malformed;
        assert!(e.source().is_none());
    }
}
