//! Standard output for the binaries: a reader that stops reading (`pipeline run | head -3`)
//! ends the output quietly instead of panicking, so the command still finishes its work and
//! exits with its own code.

use std::io::Write;

/// Write `text` to standard output and flush. A closed pipe is not an error (the reader
/// has seen all it wanted); any other failure is named on standard error once per call.
pub fn write(text: &str) {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => eprintln!("error: writing to standard output: {e}"),
    }
}

/// `println!` through [`write`].
#[macro_export]
macro_rules! outln {
    () => { $crate::out::write("\n") };
    ($($arg:tt)*) => { $crate::out::write(&format!("{}\n", format_args!($($arg)*))) };
}

/// `print!` through [`write`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::write(&format!($($arg)*)) };
}
