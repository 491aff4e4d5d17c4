//! Where the pinned MCP test peers live and how to start them
//! (`tests/mcp-peers/`, installed by its `setup.sh`).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use weft_mcp_client::{ServerConfig, ToolFilter, Transport};

/// `tests/mcp-peers` in the repository.
pub fn dir() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-peers");
    let d = d.canonicalize().unwrap_or(d);
    assert!(
        d.join("node_modules/@modelcontextprotocol/server-everything").exists(),
        "the MCP test peers are not installed: run tests/mcp-peers/setup.sh (or scripts/setup.sh)"
    );
    d
}

fn node_module(path: &str) -> String {
    dir().join("node_modules").join(path).to_string_lossy().into_owned()
}

/// server-everything over stdio.
pub fn everything_stdio(name: &str) -> ServerConfig {
    ServerConfig {
        name: name.into(),
        transport: Transport::Stdio {
            command: "node".into(),
            args: vec![node_module("@modelcontextprotocol/server-everything/dist/index.js"), "stdio".into()],
            env: BTreeMap::new(),
            cwd: None,
        },
        timeout: None,
        tools: ToolFilter::default(),
        secrets: Default::default(),
    }
}

/// server-filesystem serving `root`.
pub fn filesystem(name: &str, root: &Path) -> ServerConfig {
    ServerConfig {
        name: name.into(),
        transport: Transport::Stdio {
            command: "node".into(),
            args: vec![
                node_module("@modelcontextprotocol/server-filesystem/dist/index.js"),
                root.to_string_lossy().into_owned(),
            ],
            env: BTreeMap::new(),
            cwd: None,
        },
        timeout: None,
        tools: ToolFilter::default(),
        secrets: Default::default(),
    }
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// server-everything over streamable HTTP, killed on drop.
pub struct EverythingHttp {
    child: tokio::process::Child,
    pub port: u16,
}

impl EverythingHttp {
    pub async fn start() -> Self {
        let port = free_port();
        let child = tokio::process::Command::new("node")
            .arg(node_module("@modelcontextprotocol/server-everything/dist/index.js"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start server-everything over HTTP");
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return EverythingHttp { child, port };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("server-everything did not listen on {port} within 10 s");
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn config(&self, name: &str) -> ServerConfig {
        ServerConfig {
            name: name.into(),
            transport: Transport::Http { url: self.url(), headers: BTreeMap::new() },
            timeout: None,
            tools: ToolFilter::default(),
            secrets: Default::default(),
        }
    }
}

impl Drop for EverythingHttp {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
