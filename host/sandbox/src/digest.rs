//! Content addresses: a guest is known by the sha256 of its bytes, which is
//! what a run pins and what the compiled-artifact cache is keyed by.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

/// The sha256 of a guest's bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// Hashes `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Digest(Sha256::digest(bytes).into())
    }
    /// Lower-case hex, 64 characters.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
    /// The first 12 hex characters, for display.
    pub fn short(&self) -> String {
        self.hex()[..12].to_string()
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.short())
    }
}

/// A string that is not 64 hex characters.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a sha256 digest (64 hex characters)")]
pub struct BadDigest(pub String);

impl FromStr for Digest {
    type Err = BadDigest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.strip_prefix("sha256:").unwrap_or(s);
        let mut out = [0u8; 32];
        if s.len() != 64 || hex::decode_to_slice(s, &mut out).is_err() {
            return Err(BadDigest(s.to_string()));
        }
        Ok(Digest(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_hex() {
        let d = Digest::of(b"abc");
        assert_eq!(d.hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(d.hex().parse::<Digest>().unwrap(), d);
        assert_eq!(format!("sha256:{d}").parse::<Digest>().unwrap(), d);
        assert!("abc".parse::<Digest>().is_err());
    }
}
