//! Many workers on one database.
