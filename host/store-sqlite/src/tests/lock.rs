//! The scheduler lock: one long-lived owner at a time; short commands
//! hold it briefly and are waited for.

use super::*;

#[test]
fn the_scheduler_lock_refuses_a_second_owner() {
    let (_d, p) = tmp();
    let s = SqliteStore::open(&p, Durability::Normal).unwrap();
    let lock = s.lock_scheduler().unwrap();
    assert!(lock.path().ends_with("weft.db.lock"));
    // a second opener (another handle, as another process would have)
    let s2 = SqliteStore::open(&p, Durability::Normal).unwrap();
    match s2.lock_scheduler() {
        Err(StoreError::Locked { pid, path }) => {
            assert_eq!(pid, Some(std::process::id()));
            assert!(path.ends_with("weft.db"));
            let msg = StoreError::Locked { pid, path }.to_string();
            assert!(msg.contains("owned by another process") && msg.contains("pid"), "{msg}");
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    drop(lock);
    let again = s2.lock_scheduler().expect("free once the owner lets go");
    drop(again);
}

/// A worker starting while a short command (`weft signal`) owns the store
/// for a moment waits for it; another long-lived owner refuses it at once.
#[test]
fn an_owner_waits_out_a_brief_holder_but_not_another_owner() {
    let (_d, p) = tmp();
    let s = SqliteStore::open(&p, Durability::Normal).unwrap();
    let s2 = SqliteStore::open(&p, Durability::Normal).unwrap();
    let brief = s.lock_scheduler_briefly().unwrap();
    let holder = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(brief);
    });
    let t = std::time::Instant::now();
    let owner = s2.lock_scheduler_patiently(std::time::Duration::from_secs(10)).expect("waited for the brief holder");
    assert!(t.elapsed() >= std::time::Duration::from_millis(250), "it did not wait: {:?}", t.elapsed());
    holder.join().unwrap();
    // A brief holder's pid is still named when a plain attempt is refused.
    match s.lock_scheduler_briefly() {
        Err(StoreError::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
        other => panic!("expected Locked, got {other:?}"),
    }
    let t = std::time::Instant::now();
    assert!(matches!(s.lock_scheduler_patiently(std::time::Duration::from_secs(10)), Err(StoreError::Locked { .. })));
    assert!(t.elapsed() < std::time::Duration::from_secs(1), "it waited for an owner: {:?}", t.elapsed());
    drop(owner);

    // An owner killed by SIGKILL leaves its pid in the file; whoever holds
    // the lock next has not rewritten it yet: that holder is waited for.
    let brief = s.lock_scheduler_briefly().unwrap();
    std::fs::write(SchedulerLock::path_for(&p), "999999999").unwrap();
    let holder = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(brief);
    });
    s2.lock_scheduler_patiently(std::time::Duration::from_secs(10)).expect("waited for the new holder");
    holder.join().unwrap();
}
