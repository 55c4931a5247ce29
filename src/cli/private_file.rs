//! Files `run` writes for its child: new, private to the user (0600) in a
//! private folder (0700), never following a link someone planted.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A new private folder under the system's temporary folder.
pub fn new_dir(what: &str) -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "codemode-{what}-{}-{}",
        std::process::id(),
        crate::tenant::unguessable()
    ));
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(&dir)?;
    Ok(dir)
}

/// Creates `path`, which must not exist yet (not even as a link), 0600.
pub fn create_new(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Writes `bytes` to `path`, which must not exist yet.
pub fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    create_new(path)?.write_all(bytes)
}
