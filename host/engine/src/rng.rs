//! Injected randomness, for run ids and retry jitter.

use std::sync::atomic::{AtomicU64, Ordering};

/// A source of random numbers shared by the engine's tasks.
pub trait Rng: Send + Sync {
    fn next_u64(&self) -> u64;

    /// A uniform number in `0..=max` (`max` inclusive).
    fn below_inclusive(&self, max: u64) -> u64 {
        if max == u64::MAX {
            return self.next_u64();
        }
        // Multiply-shift: bias < 2^-64 * (max+1), irrelevant for jitter.
        ((self.next_u64() as u128 * (max as u128 + 1)) >> 64) as u64
    }
}

/// SplitMix64: deterministic from a seed (tests), or seeded from the OS
/// hasher keys, the time and the pid (`SeededRng::from_entropy`).
#[derive(Debug)]
pub struct SeededRng {
    state: AtomicU64,
}

impl SeededRng {
    pub fn new(seed: u64) -> Self {
        SeededRng { state: AtomicU64::new(seed) }
    }

    pub fn from_entropy() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0),
        );
        h.write_u32(std::process::id());
        SeededRng::new(h.finish())
    }
}

impl Rng for SeededRng {
    fn next_u64(&self) -> u64 {
        let mut z = self.state.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_is_deterministic() {
        let a = SeededRng::new(9);
        let b = SeededRng::new(9);
        for _ in 0..10 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(SeededRng::new(1).next_u64(), SeededRng::new(2).next_u64());
    }

    #[test]
    fn below_inclusive_in_range() {
        let r = SeededRng::new(5);
        let mut seen_max = false;
        for _ in 0..2000 {
            let v = r.below_inclusive(3);
            assert!(v <= 3);
            seen_max |= v == 3;
        }
        assert!(seen_max);
        assert_eq!(r.below_inclusive(0), 0);
    }
}
