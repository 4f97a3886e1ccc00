//! `tcgnn`: the command-line front end (see `tcgnn --help`).

mod cli;

use clap::Parser;

fn main() {
    quiet_on_closed_stdout();
    let args = cli::Cli::parse();
    if let Err(e) = cli::run(args) {
        // Messages quote file names and file contents: a hostile name or header must not drive
        // the terminal (control characters other than line breaks and tabs are escaped).
        let msg: String = e
            .to_string()
            .chars()
            .flat_map(|c| -> Box<dyn Iterator<Item = char>> {
                if c.is_control() && c != '\n' && c != '\t' { Box::new(c.escape_default()) } else { Box::new(std::iter::once(c)) }
            })
            .collect();
        eprintln!("error: {msg}");
        std::process::exit(1);
    }
}

/// `println!` panics when standard output fails. A reader that closed the pipe
/// (`tcgnn info cora | head -1`) has all it wanted: end quietly with success, as `ripgrep` and
/// other Rust command-line tools do. Any other write failure (a full disk, `> /dev/full`) is
/// an error: say so in one line and exit 1, without a panic message. Every other panic keeps
/// the default report (it is a bug).
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if let Some(why) = msg.strip_prefix("failed printing to stdout: ") {
            if why.contains("Broken pipe") || why.contains("os error 32") {
                std::process::exit(0);
            }
            eprintln!("error: writing to standard output: {why}");
            std::process::exit(1);
        }
        default(info);
    }));
}
