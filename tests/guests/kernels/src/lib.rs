//! The compute kernels of benchmark W2 (docs/performance.md). The hostile
//! guest runs them inside the sandbox and the W2 bench runs them natively,
//! so the ratio compares the same source. Three shapes of guest code, since
//! wasmtime's epoch and fuel checks cost per function entry and per loop
//! back-edge:
//! - [`fib()`]: call-bound, ~10⁸ calls of a few instructions (the worst case);
//! - [`sieve()`]: loop-bound, tight loops over memory;
//! - [`json()`]: what a step typically does, building, printing and parsing
//!   JSON with serde_json.

use serde_json::{Value, json};

/// The `n`th Fibonacci number, by naive recursion.
pub fn fib(n: u64) -> u64 {
    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
}

/// How many primes are ≤ `n` (the sieve of Eratosthenes).
pub fn sieve(n: u64) -> u64 {
    let n = n as usize;
    if n < 2 {
        return 0;
    }
    let mut composite = vec![false; n + 1];
    let mut i = 2;
    while i * i <= n {
        if !composite[i] {
            let mut j = i * i;
            while j <= n {
                composite[j] = true;
                j += i;
            }
        }
        i += 1;
    }
    composite[2..].iter().filter(|c| !**c).count() as u64
}

/// Builds `n` records as JSON values, prints them as one document, parses it
/// back and sums a field: a checksum of the round trip.
pub fn json(n: u64) -> u64 {
    let records: Vec<Value> = (0..n)
        .map(|i| json!({"id": i, "name": format!("item-{i}"), "tags": ["a", "b"], "price": i % 97, "ok": i % 2 == 0}))
        .collect();
    let text = Value::Array(records).to_string();
    let back: Value = serde_json::from_str(&text).expect("the printed document parses");
    back.as_array().map_or(0, |a| a.iter().filter_map(|r| r["price"].as_u64()).sum::<u64>()) + text.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_compute_what_they_say() {
        assert_eq!(fib(20), 6765);
        assert_eq!(sieve(100), 25);
        assert_eq!(sieve(1), 0);
        let one = json(1);
        assert!(json(2) > one, "a second record adds its price and its text");
    }
}
