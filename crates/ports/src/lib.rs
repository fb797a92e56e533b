//! Ports (being implemented)
pub mod config;
