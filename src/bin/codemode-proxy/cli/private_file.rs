//! Files `run` writes for its child, and `configure` beside an agent's
//! settings: new, private to the user (0600) unless told the mode to keep,
//! never following a link someone planted.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A new private folder under the system's temporary folder.
pub fn new_dir(what: &str) -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "codemode-{what}-{}-{}",
        std::process::id(),
        unguessable()
    ));
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(&dir)?;
    Ok(dir)
}

/// 128 bits from the OS random source as hex: a name no one can plant a
/// file or a link under beforehand.
pub fn unguessable() -> String {
    let mut buf = [0u8; 16];
    if let Err(e) = getrandom::getrandom(&mut buf) {
        panic!("codemode-proxy: the operating system's random source failed: {e}");
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// The mode of the files this module makes unless told another.
pub const PRIVATE: u32 = 0o600;

/// Creates `path`, which must not exist yet (not even as a link), 0600.
pub fn create_new(path: &Path) -> std::io::Result<std::fs::File> {
    create_new_with_mode(path, PRIVATE)
}

/// Creates `path`, which must not exist yet, with exactly `mode` (the
/// umask could only have narrowed it, never widened it).
pub fn create_new_with_mode(path: &Path, mode: u32) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    let file = options.open(path)?;
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
    Ok(file)
}

/// Writes `bytes` to `path`, which must not exist yet.
pub fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    create_new(path)?.write_all(bytes)
}

/// Writes `bytes` to `path`, which must not exist yet, with `mode`.
pub fn write_new_with_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    create_new_with_mode(path, mode)?.write_all(bytes)
}

/// The permission bits of the file at `path` (following links).
pub fn mode_of(path: &Path) -> std::io::Result<u32> {
    let meta = std::fs::metadata(path)?;
    #[cfg(unix)]
    return Ok(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777);
    #[cfg(not(unix))]
    return Ok(if meta.permissions().readonly() {
        0o400
    } else {
        PRIVATE
    });
}
