//! Where the command's log goes.

/// Logs to stderr at `default` unless RUST_LOG says otherwise. fuser's
/// per-request lines and its unmount warnings, and the terminal emulator's
/// notes on each unknown escape, are left out unless RUST_LOG names
/// `fuser` or `vt100` itself.
pub(super) fn init_logging(default: &str) {
    let mut builder = env_logger::Builder::new();
    builder.parse_filters(default);
    builder.filter_module("fuser", log::LevelFilter::Error);
    // The terminal emulator logs a line per escape it does not know: a
    // program printing binary would fill the log at debug level.
    builder.filter_module("vt100", log::LevelFilter::Warn);
    if let Ok(spec) = std::env::var("RUST_LOG") {
        builder.parse_filters(&spec);
    }
    builder.init();
}
