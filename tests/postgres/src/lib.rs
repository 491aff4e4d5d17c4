//! A real PostgreSQL for tests. [`database`] returns the URL of a fresh,
//! empty database on a throw-away cluster: the one `WEFT_TEST_PG` names
//! (started by `tests/postgres/start.sh`, as `scripts/test.sh` does), else
//! one this function starts itself with the same script, shared by every
//! test process of the machine through a lock file and a file naming it.
//! Nothing here skips: without a PostgreSQL the test fails, saying why.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Where a cluster started by the tests themselves is named.
fn shared_file() -> PathBuf {
    std::env::temp_dir().join("weft-test-pg.url")
}

/// The base URL of the test cluster (its `postgres` database).
pub fn server() -> String {
    if let Ok(url) = std::env::var("WEFT_TEST_PG")
        && !url.is_empty()
    {
        return url;
    }
    let lock_path = std::env::temp_dir().join("weft-test-pg.lock");
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).unwrap();
    lock.lock().expect("lock the test cluster's lock file");
    if let Ok(url) = std::fs::read_to_string(shared_file())
        && alive(url.trim())
    {
        return url.trim().to_string();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("start.sh");
    let out = Command::new("bash").arg(&script).output().expect("run tests/postgres/start.sh");
    assert!(
        out.status.success(),
        "\n\n*** The PostgreSQL tests need a PostgreSQL server and could not start one: {}\n\
         *** Install it with tests/postgres/setup.sh (Debian's postgresql), or set WEFT_TEST_PG.\n\n",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout).to_string();
    let url = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("WEFT_TEST_PG="))
        .expect("start.sh prints WEFT_TEST_PG=")
        .to_string();
    let mut f = std::fs::File::create(shared_file()).unwrap();
    writeln!(f, "{url}").unwrap();
    url
}

fn alive(url: &str) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async { tokio_postgres::connect(url, tokio_postgres::NoTls).await.is_ok() })
}

/// A fresh, empty database on the test cluster: its URL.
pub fn database() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let base = server();
    let name = format!(
        "weft_t_{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos()
    );
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (c, conn) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to the test PostgreSQL at {base}: {e}"));
        let task = tokio::spawn(conn);
        c.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create a test database");
        drop(c);
        let _ = task.await;
    });
    match base.rfind('/') {
        Some(i) => format!("{}/{name}", &base[..i]),
        None => panic!("WEFT_TEST_PG={base} does not end in /DATABASE"),
    }
}
