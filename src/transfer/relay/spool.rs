//! The worker's spool for large message bodies: each large body is written to a file **as it arrives**, before
//! the next receive, and read back from it by the target send, so a batch never holds a large body in memory. One
//! file per body (mode 0600), removed when the batch ends.
//!
//! **Where** (docs/deployment.md, "The spool directory"): a base directory, `worker.spool_dir` or else
//! [`default_base`], holds one subdirectory per worker process. The base is **private**: made with mode 0700 when
//! missing, and refused when it exists but is a symbolic link, belongs to another user or others may write in it —
//! a predictable name in a shared `$TMPDIR` that someone else made first is never used. Each worker process
//! **locks** its subdirectory for as long as it runs (`worker-<pid>-<random>.lock` beside it, an advisory `flock`
//! the kernel drops when the process dies, however it dies), and at start removes every subdirectory whose lock
//! nobody holds: what earlier runs of workers left after a crash. A living worker's subdirectory is never touched,
//! so workers on one host may share a base.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A worker process's spool: its own locked subdirectory of the base.
#[derive(Debug, Clone)]
pub struct Spool {
    dir: PathBuf,
    /// Held (locked) while this process spools; the lock goes with the process.
    _lock: Arc<File>,
}

/// Why the spool could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// The base directory exists but is not this user's alone.
    #[error(
        "the spool directory {dir} {why}, so large message bodies would not be private there: set worker.spool_dir \
         (ARTEMIS_TRANSFER__WORKER__SPOOL_DIR) to a directory of this user's own, or remove that one"
    )]
    NotPrivate {
        /// The base directory.
        dir: PathBuf,
        /// What is wrong with it, in words.
        why: String,
    },
}

/// The prefix of a worker process's subdirectory and of its lock file.
const WORKER_PREFIX: &str = "worker-";

/// The base directory when `worker.spool_dir` is unset: `artemis-transfer-spool-<uid>` in `$TMPDIR` (else `/tmp`).
pub fn default_base() -> PathBuf {
    std::env::temp_dir().join(format!("artemis-transfer-spool-{}", rustix::process::geteuid().as_raw()))
}

impl Spool {
    /// This process's spool under `base`: the base made private (or refused), this process's subdirectory made and
    /// locked, and the subdirectories of workers that are gone removed.
    pub fn create(base: impl Into<PathBuf>) -> Result<Spool, SpoolError> {
        let base = base.into();
        private_base(&base)?;
        let name = format!("{WORKER_PREFIX}{}-{}", std::process::id(), &uuid::Uuid::new_v4().simple().to_string()[..8]);
        // The lock before the directory: a directory without a held lock is always a dead worker's.
        let lock = hold_lock(&base.join(format!("{name}.lock")))
            .map_err(|source| SpoolError::Io { dir: base.clone(), source })?
            .ok_or_else(|| SpoolError::Io { dir: base.clone(), source: std::io::ErrorKind::WouldBlock.into() })?;
        let dir = base.join(&name);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|source| SpoolError::Io { dir: dir.clone(), source })?;
        remove_leftovers(&base);
        Ok(Spool { dir, _lock: Arc::new(lock) })
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

/// Makes `base` (mode 0700) when it is missing; refuses it when it is a symbolic link, not a directory, another
/// user's, or writable by others.
fn private_base(base: &Path) -> Result<(), SpoolError> {
    let io = |source| SpoolError::Io { dir: base.to_path_buf(), source };
    match std::fs::DirBuilder::new().recursive(true).mode(0o700).create(base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(e)),
    }
    let meta = std::fs::symlink_metadata(base).map_err(io)?;
    let refuse = |why: String| Err(SpoolError::NotPrivate { dir: base.to_path_buf(), why });
    let me = rustix::process::geteuid().as_raw();
    if meta.file_type().is_symlink() {
        return refuse("is a symbolic link".into());
    }
    if !meta.is_dir() {
        return refuse("is not a directory".into());
    }
    if meta.uid() != me {
        return refuse(format!("belongs to user {} (this worker runs as user {me})", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return refuse(format!("may be written by others (mode {:o})", meta.mode() & 0o777));
    }
    Ok(())
}

/// Opens (making it, mode 0600) the lock file at `path` and takes its lock; `None` when another process holds it.
fn hold_lock(path: &Path) -> std::io::Result<Option<File>> {
    let file =
        std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(path)?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Removes the subdirectories (and lock files) of `base` whose worker is gone: nobody holds their lock. A failure is
/// logged and left: it costs disk space, never a run.
fn remove_leftovers(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(WORKER_PREFIX) || name.ends_with(".lock") {
            continue;
        }
        let lock_path = base.join(format!("{name}.lock"));
        match hold_lock(&lock_path) {
            Ok(Some(_gone)) => {
                let removed = std::fs::remove_dir_all(entry.path()).and_then(|()| std::fs::remove_file(&lock_path));
                match removed {
                    Ok(()) => tracing::info!(dir = %entry.path().display(), "removed a spool a gone worker left"),
                    Err(e) => {
                        tracing::warn!(dir = %entry.path().display(), error = %e, "cannot remove a gone worker's spool")
                    }
                }
            }
            Ok(None) => {} // a living worker's
            Err(e) => {
                tracing::warn!(dir = %entry.path().display(), error = %e, "cannot tell whether a spool's worker is gone")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn fresh_base() -> PathBuf {
        std::env::temp_dir().join(format!("spool-test-{}", uuid::Uuid::new_v4()))
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[tokio::test]
    async fn files_are_private_and_removed_when_dropped() {
        let base = fresh_base();
        let spool = Spool::create(&base).unwrap();
        assert_eq!(mode(&base), 0o700);
        assert_eq!(mode(spool.dir()), 0o700);
        let mut file = spool.file().await.unwrap();
        tokio::io::AsyncWriteExt::write_all(file.writer(), b"body").await.unwrap();
        assert_eq!(file.finish().await.unwrap(), 4);
        let path = file.path.clone();
        assert_eq!(mode(&path), 0o600);
        drop(file);
        assert!(!path.exists());
        assert!(spool.check_free(1).is_ok());
        assert!(matches!(spool.check_free(u64::MAX), Err(SpoolError::Full { .. })));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_missing_base_is_made_private_with_its_parents() {
        let base = fresh_base().join("nested").join("spool");
        let spool = Spool::create(&base).unwrap();
        assert_eq!(mode(&base), 0o700);
        assert!(spool.dir().starts_with(&base));
        std::fs::remove_dir_all(base.parent().unwrap().parent().unwrap()).unwrap();
    }

    #[test]
    fn a_base_others_may_write_in_is_refused() {
        let base = fresh_base();
        std::fs::create_dir(&base).unwrap();
        for open in [0o777, 0o1777, 0o720, 0o702] {
            std::fs::set_permissions(&base, std::fs::Permissions::from_mode(open)).unwrap();
            let err = Spool::create(&base).unwrap_err();
            assert!(matches!(&err, SpoolError::NotPrivate { why, .. } if why.contains("written by others")), "{err}");
            assert!(err.to_string().contains("ARTEMIS_TRANSFER__WORKER__SPOOL_DIR"), "{err}");
        }
        assert_eq!(std::fs::read_dir(&base).unwrap().count(), 0, "nothing was made in a refused base");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_base_of_another_user_or_a_link_is_refused() {
        let base = fresh_base();
        std::fs::create_dir(&base).unwrap();
        let link = fresh_base();
        std::os::unix::fs::symlink(&base, &link).unwrap();
        let err = Spool::create(&link).unwrap_err();
        assert!(matches!(&err, SpoolError::NotPrivate { why, .. } if why.contains("symbolic link")), "{err}");
        // Only root can give a directory away; as anyone else the owner check is the same comparison.
        if rustix::process::geteuid().is_root() {
            let nobody = rustix::process::Uid::from_raw(65534);
            rustix::fs::chown(&base, Some(nobody), None).unwrap();
            let err = Spool::create(&base).unwrap_err();
            assert!(
                matches!(&err, SpoolError::NotPrivate { why, .. } if why.contains("belongs to user 65534")),
                "{err}"
            );
        } else {
            println!("not root: the directory of another user is not made here");
        }
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn leftovers_of_gone_workers_are_removed_at_start_and_a_living_workers_spool_is_kept() {
        let base = fresh_base();
        let living = Spool::create(&base).unwrap();
        std::fs::write(living.dir().join("body"), b"in use").unwrap();
        // A worker that crashed: its subdirectory and files, its lock file held by nobody; one from before the lock
        // was taken (no lock file at all).
        let gone = base.join("worker-1-deadbeef");
        std::fs::create_dir(&gone).unwrap();
        std::fs::write(gone.join("body"), b"left behind").unwrap();
        std::fs::write(base.join("worker-1-deadbeef.lock"), b"").unwrap();
        let unlocked = base.join("worker-2-cafebabe");
        std::fs::create_dir(&unlocked).unwrap();
        let foreign = base.join("notes.txt");
        std::fs::write(&foreign, b"not a worker's").unwrap();

        let next = Spool::create(&base).unwrap();
        assert!(!gone.exists() && !base.join("worker-1-deadbeef.lock").exists(), "a gone worker's spool stays");
        assert!(!unlocked.exists());
        assert!(living.dir().join("body").exists(), "a living worker's spool was removed");
        assert!(foreign.exists(), "only worker spools are removed");
        assert_ne!(next.dir(), living.dir());
        drop(next);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
