//! Command-line pieces; the binary (`src/main.rs`) mounts them as subcommands.

pub mod graph_cmds;
