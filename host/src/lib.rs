//! weft library
