//! The worker's spool for large message bodies (SPEC §4.2 step 2): each large body is written to a file **as
//! it arrives**, before the next receive, and read back from it by the target send, so a batch never holds a
//! large body in memory. One directory per worker process (mode 0700), one file per body (mode 0600), removed
//! when the batch ends (and the whole directory when the process starts again: a spool outlives no batch).

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// A worker's spool directory.
#[derive(Debug, Clone)]
pub struct Spool {
    dir: PathBuf,
}

/// Why the spool could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// A file system call failed.
    #[error("the spool directory {dir}: {source}")]
    Io {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not enough free space for a batch.
    #[error("the spool directory {dir} has {free} bytes free, less than the {needed} bytes a batch may spool")]
    Full {
        /// The directory.
        dir: PathBuf,
        /// Bytes free.
        free: u64,
        /// Bytes needed.
        needed: u64,
    },
}

impl Spool {
    /// Makes (or empties) `dir` with mode 0700.
    pub fn create(dir: impl Into<PathBuf>) -> Result<Spool, SpoolError> {
        let dir = dir.into();
        let io = |source| SpoolError::Io { dir: dir.clone(), source };
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io)?;
        }
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(io)?;
        Ok(Spool { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Checks that `needed` bytes are free before a batch starts receiving.
    pub fn check_free(&self, needed: u64) -> Result<(), SpoolError> {
        let stat = rustix::fs::statvfs(&self.dir)
            .map_err(|e| SpoolError::Io { dir: self.dir.clone(), source: std::io::Error::from(e) })?;
        let free = stat.f_bavail.saturating_mul(stat.f_frsize);
        if free < needed {
            return Err(SpoolError::Full { dir: self.dir.clone(), free, needed });
        }
        Ok(())
    }

    /// A new, empty body file (mode 0600), removed when the returned handle is dropped.
    pub async fn file(&self) -> Result<SpoolFile, SpoolError> {
        let path = self.dir.join(uuid::Uuid::new_v4().to_string());
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .await
            .map_err(|source| SpoolError::Io { dir: self.dir.clone(), source })?;
        Ok(SpoolFile { path, file: Some(file) })
    }
}

/// One spooled body.
#[derive(Debug)]
pub struct SpoolFile {
    path: PathBuf,
    file: Option<tokio::fs::File>,
}

impl SpoolFile {
    /// The file to write the body into as it arrives.
    pub fn writer(&mut self) -> &mut tokio::fs::File {
        self.file.as_mut().expect("a spool file is written before it is read")
    }

    /// Finishes writing; the body can then be read back with [`SpoolFile::reader`].
    pub async fn finish(&mut self) -> std::io::Result<u64> {
        use tokio::io::AsyncWriteExt;
        let mut file = self.file.take().expect("finished once");
        // No fsync: a spool file outlives no batch, and after a crash the body is still in staging.
        file.flush().await?;
        Ok(file.metadata().await?.len())
    }

    /// The body, from the start.
    pub async fn reader(&self) -> std::io::Result<tokio::fs::File> {
        tokio::fs::File::open(&self.path).await
    }
}

impl Drop for SpoolFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[tokio::test]
    async fn files_are_private_and_removed_when_dropped() {
        let base = std::env::temp_dir().join(format!("spool-test-{}", uuid::Uuid::new_v4()));
        let spool = Spool::create(&base).unwrap();
        assert_eq!(std::fs::metadata(spool.dir()).unwrap().permissions().mode() & 0o777, 0o700);
        let mut file = spool.file().await.unwrap();
        tokio::io::AsyncWriteExt::write_all(file.writer(), b"body").await.unwrap();
        assert_eq!(file.finish().await.unwrap(), 4);
        let path = file.path.clone();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        drop(file);
        assert!(!path.exists());
        assert!(spool.check_free(1).is_ok());
        assert!(matches!(spool.check_free(u64::MAX), Err(SpoolError::Full { .. })));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
