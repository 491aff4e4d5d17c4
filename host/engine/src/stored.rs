//! Decoding what a store holds, shared by every implementation of
//! [`crate::Store`]: stored JSON values are read back with their depth
//! checked rather than by recursion.

use serde_json::Value;

use crate::store::StoreError;

/// Nesting past which a stored value is taken for damage, not data (what
/// weft writes nests at most `weft_engine::size_limits::MAX_DEPTH` plus a few).
const READ_DEPTH: usize = 1000;

/// A stored JSON value. serde_json's 128-level default would make a value
/// written before the depth cap (a guest's 127-deep output, wrapped once
/// more) unreadable for good, and with it `runs show` and the run's
/// driver; the depth is checked here instead, without recursion.
pub fn value(s: &str) -> Result<Value, StoreError> {
    let (mut depth, mut max, mut in_str, mut esc) = (0usize, 0usize, false, false);
    for b in s.bytes() {
        match (in_str, esc, b) {
            (true, true, _) => esc = false,
            (true, false, b'\\') => esc = true,
            (true, false, b'"') => in_str = false,
            (true, ..) => {}
            (false, _, b'"') => in_str = true,
            (false, _, b'[' | b'{') => {
                depth += 1;
                max = max.max(depth);
            }
            (false, _, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if max > READ_DEPTH {
        return Err(StoreError::Corrupt(format!("a stored value nests {max} levels deep (more than {READ_DEPTH})")));
    }
    let mut de = serde_json::Deserializer::from_str(s);
    de.disable_recursion_limit();
    let v = serde::Deserialize::deserialize(&mut de).map_err(corrupt)?;
    de.end().map_err(corrupt)?;
    Ok(v)
}

fn corrupt(e: serde_json::Error) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

#[cfg(test)]
mod tests {
    /// A value nested past serde_json's default 128 levels (written before
    /// the depth cap) still reads; damage past `READ_DEPTH` is reported.
    #[test]
    fn deep_values_read_back_and_damage_is_reported() {
        let nest = |n: usize| format!("{}\"[{{\"{}", "[".repeat(n), "]".repeat(n));
        let v = super::value(&nest(200)).unwrap();
        assert!(v.is_array());
        let e = super::value(&nest(5000)).unwrap_err();
        assert!(e.to_string().contains("5000 levels"), "{e}");
        assert!(super::value("{\"a\": 1} x").is_err(), "trailing data");
    }
}
