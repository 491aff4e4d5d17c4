//! MCP over stdin/stdout with every message answered: weft reads the
//! client's lines itself, hands rmcp those under the cap of one message
//! ([`crate::Core::message_cap`], the same as over HTTP), and answers a
//! longer one with a JSON-RPC error naming the cap (`oversized.rs`)
//! instead of rmcp dropping it silently (the client would wait forever).
//! rmcp's answers and weft's errors reach stdout as whole lines through one
//! writer, so they never interleave.

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::oversized::Kept;

/// The transport rmcp serves over, and the task that feeds and drains it
/// between `input` and `output` (the process's stdin and stdout); the task
/// ends when `input` ends and rmcp's last answer is written.
pub fn capped<R, W>(
    input: R,
    output: W,
    cap: usize,
) -> ((tokio::io::DuplexStream, tokio::io::DuplexStream), impl std::future::Future<Output = ()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_rmcp, rmcp_reads) = tokio::io::duplex(256 << 10);
    let (rmcp_writes, from_rmcp) = tokio::io::duplex(256 << 10);
    let (lines, mut out) = mpsc::channel::<Vec<u8>>(64);
    let errors = lines.clone();
    let read = async move {
        let _ = forward_requests(input, to_rmcp, errors, cap).await;
    };
    let answers = async move {
        let mut from_rmcp = BufReader::new(from_rmcp);
        loop {
            let mut line = Vec::new();
            match from_rmcp.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if lines.send(line).await.is_err() {
                        break;
                    }
                }
            }
        }
    };
    let write = async move {
        let mut output = output;
        while let Some(line) = out.recv().await {
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    };
    let pump = async move {
        tokio::join!(read, answers, write);
    };
    ((rmcp_reads, rmcp_writes), pump)
}

/// Copies each line of `input` under `cap` bytes to rmcp; answers a longer
/// one on `errors` (it is skipped to its end, keeping only its first and
/// last bytes to find its id).
async fn forward_requests<R: AsyncRead + Unpin>(
    input: R,
    mut to_rmcp: tokio::io::DuplexStream,
    errors: mpsc::Sender<Vec<u8>>,
    cap: usize,
) -> std::io::Result<()> {
    let mut input = BufReader::with_capacity(64 << 10, input);
    let mut line: Vec<u8> = Vec::new();
    // Past the cap: what is kept of the line to answer it.
    let mut over: Option<Kept> = None;
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            // The client closed stdin: a partial last line is no message.
            to_rmcp.shutdown().await?;
            return Ok(());
        }
        let (part, ends) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (&chunk[..=i], true),
            None => (chunk, false),
        };
        let n = part.len();
        match &mut over {
            None if line.len() + n <= cap + 1 => line.extend_from_slice(part),
            None => {
                let mut kept = Kept::of(&line);
                kept.push(part);
                line.clear();
                over = Some(kept);
            }
            Some(kept) => kept.push(part),
        }
        input.consume(n);
        if !ends {
            continue;
        }
        match over.take() {
            Some(kept) => {
                tracing::warn!(bytes = kept.size, cap, "refused an MCP message over the cap");
                let mut reply = serde_json::to_vec(&kept.refusal(cap)).expect("JSON");
                reply.push(b'\n');
                if errors.send(reply).await.is_err() {
                    return Ok(());
                }
            }
            None => {
                to_rmcp.write_all(&line).await?;
                line.clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn lines_under_the_cap_reach_rmcp_and_a_longer_one_is_answered() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"x\",\"params\":{{\"d\":\"{}\"}}}}\n",
            "a".repeat(5000)
        );
        let small = "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"y\"}\n";
        let input = format!("{small}{big}{small}");
        let (client_out, mut client_in) = tokio::io::duplex(1 << 20);
        let ((mut rmcp_reads, rmcp_writes), pump) = capped(std::io::Cursor::new(input.into_bytes()), client_out, 1000);
        let task = tokio::spawn(pump);
        let mut got = String::new();
        rmcp_reads.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, format!("{small}{small}"), "rmcp sees the two small lines");
        drop(rmcp_writes);
        task.await.unwrap();
        let mut answered = String::new();
        client_in.read_to_string(&mut answered).await.unwrap();
        let v: Value = serde_json::from_str(answered.trim()).unwrap();
        assert!(v.get("method").is_none(), "an answer, not a request: {v}");
        assert_eq!(v["id"], json!(5));
        assert_eq!(v["error"]["data"]["max_bytes"], 1000);
    }
}
