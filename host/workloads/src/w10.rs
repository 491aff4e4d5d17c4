//! W10 scale-out of docs/performance.md: W3 and W6 on PostgreSQL with 1, 2 and
//! 4 `weft worker` processes (separate processes of this same binary, or
//! of `$WEFT_BENCH_SERVER`), on a database the bench creates per
//! configuration on the server `--database` names.
//!
//! - **throughput**: a client (this process, a PostgreSQL client that
//!   drives no run) creates a backlog of trivial-3 runs (three `json-select`
//!   steps) while no worker runs; then N workers start and the figure is
//!   runs ÷ (last run's end − first attempt's start), from the store's
//!   own times; with the CPU the database server's processes (when it runs
//!   on this machine) and the workers spent per run.
//! - **latency**: one run at a time, created by the client and awaited by
//!   LISTEN: from creation to the client seeing it completed.
//! - **failover** (N = 2): under a backlog, one worker is SIGKILLed; the
//!   figure is how long until another took its runs over (its `workers`
//!   row deleted) against the lease + 1 s target; then every run must
//!   complete with no success repeated. Then the same with SIGSTOP and
//!   SIGCONT: the paused worker's late commits must be refused.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use weft_engine::{RunOptions, StoreWatch};

use super::client::Client;
use super::{Figures, pct};

/// Runs of the throughput backlog per worker count.
const BACKLOG: usize = 10_000;
/// Runs timed one at a time for latency.
const LATENCY_RUNS: usize = 200;
/// The workers' lease (the default).
const LEASE_MS: u64 = 5_000;

/// A database on the server: a client, the URL, and how to drop it.
struct Db {
    url: String,
    client: tokio_postgres::Client,
}

impl Db {
    async fn count(&self, sql: &str) -> anyhow::Result<i64> {
        Ok(self.client.query_one(sql, &[]).await?.get(0))
    }
}

/// A fresh database named `name` on the server of `base`.
async fn fresh(base: &str, name: &str) -> anyhow::Result<Db> {
    let (admin, conn) = tokio_postgres::connect(base, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).await?;
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await?;
    let url = match base.rfind('/') {
        Some(i) if !base[..i].ends_with('/') => format!("{}/{name}", &base[..i]),
        _ => anyhow::bail!("--database {base}: name a database (postgres://USER@HOST:PORT/DB)"),
    };
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(Db { url, client })
}

fn worker(exe: &std::path::Path, url: &str, dir: &std::path::Path, n: usize) -> anyhow::Result<Child> {
    let log = std::fs::File::create(dir.join(format!("worker{n}.log")))?;
    Ok(Command::new(exe)
        .arg("worker")
        .env("WEFT_DATABASE", url)
        .env("WEFT_DATA_DIR", dir.join("data"))
        .env_remove("WEFT_CONFIG")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()?)
}

fn kill(child: &Child, sig: &str) {
    let _ = Command::new("kill").args([sig, &child.id().to_string()]).status();
}

/// A client of the database at `url` (a process that drives no run) with
/// the trivial-3 plan prepared: the runs it creates are free for any
/// worker to claim.
pub async fn client(url: &str, dir: &std::path::Path) -> anyhow::Result<Client> {
    let pg = weft_store_postgres::PgStore::connect(url, Default::default()).await?;
    Client::over(Arc::new(pg), dir, super::w9::chain("trivial3", 3)).await
}

/// Creates `n` runs, 64 at a time: their creation rate.
pub async fn backlog(c: &Client, n: usize) -> anyhow::Result<f64> {
    let t = Instant::now();
    let mut done = 0;
    while done < n {
        let k = (n - done).min(64);
        let creates = (0..k).map(|_| c.engine.create_run(&c.plan, json!({}), RunOptions::default()));
        for r in futures::future::join_all(creates).await {
            r?;
        }
        done += k;
    }
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

/// Waits (woken by LISTEN) until no run is unfinished, at most `limit`.
async fn drained(db: &Db, watch: &mut Box<dyn StoreWatch>, limit: Duration) -> anyhow::Result<()> {
    let until = Instant::now() + limit;
    loop {
        let left = db
            .count(
                "SELECT count(*) FROM runs WHERE state IN ('submitted', 'working', 'input-required', 'auth-required')",
            )
            .await?;
        if left == 0 {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < until, "W10: {left} runs still unfinished after {limit:?}");
        // The figure comes from the store's own times: looking rarely keeps
        // the bench's count (a scan of the runs) out of the database's way.
        let _ = tokio::time::timeout(Duration::from_millis(250), watch.changed()).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// CPU time so far of every PostgreSQL server process on this machine (by
/// pid): what the database spent, when the server runs here (0 else).
struct PgCpu(std::collections::HashMap<u32, f64>);

fn postgres_cpu() -> PgCpu {
    let mut m = std::collections::HashMap::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "postgres") {
            m.insert(pid, super::served::cpu_us(pid));
        }
    }
    PgCpu(m)
}

impl PgCpu {
    /// µs spent since `before` (processes started meanwhile count whole).
    fn since(&self, before: &PgCpu) -> f64 {
        self.0.iter().map(|(pid, us)| us - before.0.get(pid).copied().unwrap_or(0.0)).sum()
    }
}

/// Units with other than exactly one success, or with an attempt left
/// running (must be 0).
async fn repeated(db: &Db) -> anyhow::Result<i64> {
    db.count(
        "SELECT count(*) FROM (SELECT 1 FROM attempts GROUP BY run_id, step, item
           HAVING count(*) FILTER (WHERE state = 'succeeded') <> 1
               OR count(*) FILTER (WHERE state = 'running') > 0) x",
    )
    .await
}

/// Runs W10 against the PostgreSQL server of `base` (a URL naming any
/// database the bench's user can connect to; the bench creates its own).
pub fn run(base: &str, runs: Option<usize>, out: &mut Figures) -> anyhow::Result<()> {
    let exe = match std::env::var_os("WEFT_BENCH_SERVER") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::current_exe()?,
    };
    let backlog_runs = runs.unwrap_or(BACKLOG);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        for workers in [1usize, 2, 4] {
            let dir = tempfile::tempdir()?;
            let db = fresh(base, &format!("weft_w10_{}_{workers}", std::process::id())).await?;
            let c = client(&db.url, dir.path()).await?;
            let mut watch = c.store.watch().ok_or_else(|| anyhow::anyhow!("no LISTEN watch"))?;
            let create_per_s = backlog(&c, backlog_runs).await?;
            let pg0 = postgres_cpu();
            let mut children: Vec<Child> =
                (0..workers).map(|n| worker(&exe, &db.url, dir.path(), n)).collect::<anyhow::Result<_>>()?;
            drained(&db, &mut watch, Duration::from_secs(600)).await?;
            let db_us = (postgres_cpu().since(&pg0) / backlog_runs as f64).round();
            let worker_us =
                (children.iter().map(|c| super::served::cpu_us(c.id())).sum::<f64>() / backlog_runs as f64).round();
            let span_ms = db
                .count(
                    "SELECT ((SELECT max(updated_at) FROM runs) - (SELECT min(started_at) FROM attempts))::bigint",
                )
                .await?
                .max(1);
            let per_s = backlog_runs as f64 * 1000.0 / span_ms as f64;
            let txns = db.count("SELECT xact_commit::bigint FROM pg_stat_database WHERE datname = current_database()").await?;
            out.line(
                format!(
                    "W10 pg trivial-3 throughput workers={workers} runs={backlog_runs} runs_per_s={per_s:.0} create_per_s={create_per_s:.0} db_commits_per_run={:.2} db_cpu_us_per_run={db_us} workers_cpu_us_per_run={worker_us} target=2000",
                    txns as f64 / backlog_runs as f64
                ),
                json!({"workload": "W10", "figure": "throughput", "workers": workers, "runs": backlog_runs,
                       "runs_per_s": per_s, "create_per_s": create_per_s, "db_cpu_us_per_run": db_us,
                       "workers_cpu_us_per_run": worker_us,
                       "db_commits_per_run": txns as f64 / backlog_runs as f64, "target": 2000}),
            );
            // Latency: one run at a time, from creation to completion seen.
            let mut ms = vec![];
            for _ in 0..LATENCY_RUNS {
                let t = Instant::now();
                let id = c.engine.create_run(&c.plan, json!({}), RunOptions::default()).await?;
                loop {
                    let rec = c.store.run(&id).await?.ok_or_else(|| anyhow::anyhow!("run {id} vanished"))?;
                    if rec.state.is_terminal() {
                        anyhow::ensure!(rec.state == weft_engine::RunState::Completed, "run {id} {}", rec.state);
                        break;
                    }
                    let _ = tokio::time::timeout(Duration::from_millis(200), watch.changed()).await;
                }
                ms.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            out.line(
                format!(
                    "W10 pg trivial-3 latency workers={workers} runs={LATENCY_RUNS} p50_ms={:.2} p95_ms={:.2}",
                    pct(&ms, 0.5),
                    pct(&ms, 0.95)
                ),
                json!({"workload": "W10", "figure": "latency", "workers": workers, "p50_ms": pct(&ms, 0.5), "p95_ms": pct(&ms, 0.95)}),
            );
            if workers == 2 {
                for how in ["-KILL", "-STOP"] {
                    failover(&db, &c, &mut watch, &mut children, how, backlog_runs / 2, out).await?;
                }
            }
            for ch in &mut children {
                kill(ch, "-CONT");
                kill(ch, "-TERM");
                let _ = ch.wait();
            }
            drop(c);
            drop(db);
        }
        anyhow::Ok(())
    })
}

/// Under a backlog of `n` runs, `how` (SIGKILL or SIGSTOP) one of the
/// workers once a quarter of them completed; how long until it was taken
/// over; then every run completes and no success is repeated. A stopped
/// worker is continued once taken over, and a fresh worker replaces a
/// killed one.
async fn failover(
    db: &Db,
    c: &Client,
    watch: &mut Box<dyn StoreWatch>,
    children: &mut [Child],
    how: &str,
    n: usize,
    out: &mut Figures,
) -> anyhow::Result<()> {
    let done_before = db.count("SELECT count(*) FROM runs WHERE state = 'completed'").await?;
    backlog(c, n).await?;
    let quarter = done_before + n as i64 / 4;
    while db.count("SELECT count(*) FROM runs WHERE state = 'completed'").await? < quarter {
        let _ = tokio::time::timeout(Duration::from_millis(50), watch.changed()).await;
    }
    let victim = &children[0];
    let pid = victim.id();
    let epoch: i64 = db
        .client
        .query_one("SELECT epoch FROM workers WHERE name LIKE '%:' || $1::text", &[&pid.to_string()])
        .await?
        .get(0);
    let t = Instant::now();
    kill(victim, how);
    loop {
        let gone = db.client.query_opt("SELECT 1 FROM workers WHERE epoch = $1", &[&epoch]).await?.is_none();
        if gone {
            break;
        }
        anyhow::ensure!(t.elapsed() < Duration::from_secs(60), "W10: worker {pid} was never taken over");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let takeover_ms = t.elapsed().as_secs_f64() * 1000.0;
    if how == "-STOP" {
        kill(victim, "-CONT");
    }
    drained(db, watch, Duration::from_secs(600)).await?;
    let repeated = repeated(db).await?;
    let interrupted = db.count("SELECT coalesce(sum(interruptions), 0)::bigint FROM attempts").await?;
    let name = if how == "-KILL" { "kill" } else { "pause" };
    out.line(
        format!(
            "W10 pg failover {name} workers=2 runs={n} lease_ms={LEASE_MS} takeover_ms={takeover_ms:.0} target_ms={} repeated_successes={repeated} interruptions={interrupted}",
            LEASE_MS + 1000
        ),
        json!({"workload": "W10", "figure": "failover", "how": name, "runs": n, "lease_ms": LEASE_MS,
               "takeover_ms": takeover_ms, "target_ms": LEASE_MS + 1000, "repeated_successes": repeated,
               "interruptions": interrupted}),
    );
    anyhow::ensure!(repeated == 0, "W10: {repeated} units ran to success more than once");
    if how == "-KILL" {
        let _ = children[0].wait();
        let dir = std::env::temp_dir();
        children[0] = worker(&std::env::current_exe()?, &db.url, &dir, 9)?;
    }
    Ok(())
}
