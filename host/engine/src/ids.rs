//! Typed identifiers. Strings appear only at the SQL / JSON edge
//! (`Display`, `FromStr`, serde as a string).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::rng::Rng;

/// Crockford base32, lower case (no i, l, o, u): sorts like the numbers it encodes.
const CROCKFORD: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// A run id: `r_` + 26 Crockford base32 characters: 10 of a 48-bit
/// millisecond timestamp, then 16 of 80 random bits (ULID layout), so ids
/// sort by creation time.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid run id {0:?}: expected r_ followed by 26 Crockford base32 characters")]
pub struct InvalidRunId(pub String);

impl RunId {
    /// A new id from a time (ms since epoch) and injected randomness.
    pub fn generate(now_ms: i64, rng: &dyn Rng) -> Self {
        Self::from_bits(Self::bits(now_ms, rng))
    }

    /// The id's 128 bits: 48 of time, then 80 random.
    fn bits(now_ms: i64, rng: &dyn Rng) -> u128 {
        let ts = (now_ms.max(0) as u64) & ((1u64 << 48) - 1);
        let hi = rng.next_u64() & 0xffff; // 16 bits
        let lo = rng.next_u64(); // 64 bits
        ((ts as u128) << 80) | ((hi as u128) << 64) | lo as u128
    }

    /// The id of 128 bits (the top 48 the time): 26 characters of 5 bits.
    fn from_bits(bits: u128) -> Self {
        let mut s = String::with_capacity(28);
        s.push_str("r_");
        for i in (0..26).rev() {
            s.push(CROCKFORD[((bits >> (i * 5)) & 31) as usize] as char);
        }
        RunId(s)
    }

    /// An id determined by `(at_ms, key)`: what a retried creation of the
    /// same thing (a child run of a step, a schedule's fire time) must get,
    /// so the second creation conflicts instead of running twice.
    pub fn derive(at_ms: i64, key: &str) -> Self {
        /// FNV-1a, 64 bits, from a given basis.
        fn fnv(basis: u64, bytes: &[u8]) -> u64 {
            bytes.iter().fold(basis, |h, b| (h ^ *b as u64).wrapping_mul(0x100000001b3))
        }
        struct Fixed([u64; 2], std::sync::atomic::AtomicUsize);
        impl Rng for Fixed {
            fn next_u64(&self) -> u64 {
                self.0[self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 2]
            }
        }
        let k = key.as_bytes();
        let r = Fixed([fnv(0xcbf29ce484222325, k), fnv(0x84222325cbf29ce4, k)], Default::default());
        RunId::generate(at_ms, &r)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The creation time encoded in the id (ms since epoch).
    pub fn timestamp_ms(&self) -> i64 {
        let mut ts: u64 = 0;
        for c in self.0[2..12].bytes() {
            ts = (ts << 5) | decode_char(c).unwrap_or(0) as u64;
        }
        ts as i64
    }
}

/// Hands out run ids that increase strictly, one after another (the
/// monotonic variant of ULID): the first id of a millisecond is random after
/// its time, each further one in that millisecond is the previous plus one.
///
/// Why: the store keys a run's rows (run, steps, attempts, events) by its
/// id. Runs created together are in flight together and commit together;
/// with ids in creation order their rows sit side by side in the store's
/// B-trees, so one group commit writes a few shared pages instead of one
/// page per run per table (random order within a millisecond scattered the
/// runs of one burst across every leaf at the tree's right edge).
#[derive(Debug, Default)]
pub struct RunIds {
    last: std::sync::Mutex<u128>,
}

impl RunIds {
    /// The next id: after every id this source handed out before.
    pub fn next(&self, now_ms: i64, rng: &dyn Rng) -> RunId {
        let fresh = RunId::bits(now_ms, rng);
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        *last = if fresh > *last { fresh } else { last.wrapping_add(1) };
        RunId::from_bits(*last)
    }
}

#[cfg(test)]
#[test]
fn derived_ids_are_stable_and_distinct() {
    let a = RunId::derive(1_700_000_000_000, "r_x/step");
    assert_eq!(a, RunId::derive(1_700_000_000_000, "r_x/step"));
    assert_ne!(a, RunId::derive(1_700_000_000_000, "r_x/other"));
    assert_eq!(a.timestamp_ms(), 1_700_000_000_000);
    assert_eq!(a.as_str().parse::<RunId>().unwrap(), a);
}

fn decode_char(c: u8) -> Option<u8> {
    let c = c.to_ascii_lowercase();
    CROCKFORD.iter().position(|&x| x == c).map(|p| p as u8)
}

impl FromStr for RunId {
    type Err = InvalidRunId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = s.len() == 28
            && s.starts_with("r_")
            && s[2..].bytes().all(|c| decode_char(c).is_some())
            // the first char carries only 3 bits of the 48-bit time
            && decode_char(s.as_bytes()[2]).is_some_and(|v| v < 8);
        if ok { Ok(RunId(s.to_ascii_lowercase())) } else { Err(InvalidRunId(s.to_string())) }
    }
}

impl TryFrom<String> for RunId {
    type Error = InvalidRunId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RunId({})", self.0)
    }
}

/// An attempt number; the first attempt is 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AttemptNo(u32);

impl AttemptNo {
    pub const FIRST: AttemptNo = AttemptNo(1);
    /// `None` for 0: attempts are numbered from 1.
    pub fn new(n: u32) -> Option<Self> {
        (n >= 1).then_some(AttemptNo(n))
    }
    pub fn get(self) -> u32 {
        self.0
    }
    pub fn next(self) -> Self {
        AttemptNo(self.0 + 1)
    }
}

impl fmt::Display for AttemptNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A position in a run's event log; the first event is 1, 0 means "before
/// everything" (read `events_after(Seq::ZERO)` for the whole log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct Seq(pub u64);

impl Seq {
    pub const ZERO: Seq = Seq(0);
    pub fn next(self) -> Seq {
        Seq(self.0 + 1)
    }
}

/// The index of an item of a `for_each` step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ItemIndex(pub u32);

impl fmt::Display for ItemIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The deterministic idempotency key of an attempt:
/// `<run_id>/<step>[/<item>]/<attempt>`.
pub fn idempotency_key(run: &RunId, step: &str, item: Option<ItemIndex>, attempt: AttemptNo) -> String {
    match item {
        Some(i) => format!("{run}/{step}/{i}/{attempt}"),
        None => format!("{run}/{step}/{attempt}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SeededRng;

    /// Ids of one source increase strictly: within a millisecond, across
    /// milliseconds, and when the clock steps back; each parses back.
    #[test]
    fn run_ids_of_one_source_increase_strictly() {
        let (ids, rng) = (RunIds::default(), SeededRng::new(9));
        let mut prev: Option<RunId> = None;
        for now in [1_763_800_000_000i64; 50].into_iter().chain([1_763_800_000_001; 50]).chain([1_763_799_999_000; 5]) {
            let id = ids.next(now, &rng);
            assert_eq!(id.as_str().parse::<RunId>().unwrap(), id);
            if let Some(p) = &prev {
                assert!(id > *p, "{id} after {p}");
            }
            prev = Some(id);
        }
        // A new millisecond starts from its own time (and randomness).
        let id = ids.next(1_763_800_000_500, &rng);
        assert_eq!(id.timestamp_ms(), 1_763_800_000_500);
        // generate() and next() lay out the same bits.
        let fixed = crate::rng::SeededRng::new(4);
        let a = RunId::generate(1_763_800_000_000, &fixed);
        let b = RunIds::default().next(1_763_800_000_000, &crate::rng::SeededRng::new(4));
        assert_eq!(a, b);
    }

    #[test]
    fn run_id_shape_and_roundtrip() {
        let rng = SeededRng::new(7);
        let id = RunId::generate(1_763_800_000_000, &rng);
        assert_eq!(id.as_str().len(), 28);
        assert!(id.as_str().starts_with("r_"));
        assert_eq!(id.timestamp_ms(), 1_763_800_000_000);
        let back: RunId = id.as_str().parse().unwrap();
        assert_eq!(back, id);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        let de: RunId = serde_json::from_str(&json).unwrap();
        assert_eq!(de, id);
    }

    #[test]
    fn run_ids_sort_by_time() {
        let rng = SeededRng::new(1);
        let mut prev = RunId::generate(1000, &rng);
        for t in [1001, 5000, 1 << 40, (1 << 47) + 3] {
            let id = RunId::generate(t, &rng);
            assert!(id > prev, "{id} should sort after {prev}");
            prev = id;
        }
    }

    #[test]
    fn same_ms_ids_differ() {
        let rng = SeededRng::new(3);
        let a = RunId::generate(42, &rng);
        let b = RunId::generate(42, &rng);
        assert_ne!(a, b);
        assert_eq!(a.as_str()[..12], b.as_str()[..12]);
    }

    #[test]
    fn bad_run_ids_refused() {
        for bad in [
            "",
            "r_",
            "x_0000000000000000000000000a",
            "r_000000000000000000000000u0",
            "r_9zzzzzzzzzzzzzzzzzzzzzzzzz",
            "r_0000000000000000000000000",
        ] {
            assert!(bad.parse::<RunId>().is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<RunId>("\"nope\"").is_err());
    }

    #[test]
    fn attempts_start_at_one() {
        assert!(AttemptNo::new(0).is_none());
        assert_eq!(AttemptNo::FIRST.get(), 1);
        assert_eq!(AttemptNo::FIRST.next().get(), 2);
    }

    #[test]
    fn idempotency_keys() {
        let id: RunId = "r_0000000000000000000000000a".parse().unwrap();
        assert_eq!(idempotency_key(&id, "s", None, AttemptNo::FIRST), "r_0000000000000000000000000a/s/1");
        assert_eq!(
            idempotency_key(&id, "s", Some(ItemIndex(4)), AttemptNo::new(2).unwrap()),
            "r_0000000000000000000000000a/s/4/2"
        );
    }
}
