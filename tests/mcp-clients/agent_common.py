"""What the scripts that play an LLM agent share (llm_agent.py,
llm_recording.py): checks that raise with what was seen, the parts of a
tool result, and the stdio server they start (`weft serve --stdio` with
the data folder, config and artifact cache the Rust test passes)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from mcp import StdioServerParameters


def check(cond: bool, what: str, seen: Any = None) -> None:
    if not cond:
        raise AssertionError(f"{what}: {json.dumps(seen, default=str)[:3000]}")


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


def structured(result: Any) -> Any:
    return getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)


def meta_of(result: Any) -> dict:
    m = getattr(result, "meta", None)
    if m is None:
        return {}
    return m if isinstance(m, dict) else dict(m)


def server_args(ap: argparse.ArgumentParser) -> None:
    """The arguments naming the server: --weft, --config, --data-dir, --cache-dir."""
    ap.add_argument("--weft", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--cache-dir")


def stdio_server(args: argparse.Namespace) -> StdioServerParameters:
    """`weft serve --stdio` in the data folder, with the config."""
    env = {"WEFT_DATA_DIR": args.data_dir, "WEFT_CONFIG": args.config, "NO_COLOR": "1"}
    if args.cache_dir:
        env["WEFT_CACHE_DIR"] = args.cache_dir
    return StdioServerParameters(command=args.weft, args=["serve", "--stdio"], env=env, cwd=args.data_dir)
