//! weft's MCP client side.
