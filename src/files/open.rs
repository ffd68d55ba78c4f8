//! Opening a file the adapters read (certificates, keys, the config, the
//! settings file, a file of objects) so that no path can make the reader
//! wait: opened with `O_NONBLOCK`, so a FIFO nobody writes to opens at once
//! instead of blocking the opener until a writer comes, then checked on
//! the opened descriptor (no window between the check and the read) to be
//! what the caller accepts.

use std::fs::{File, FileType, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// What a path may be, once its symlinks are followed (kubelet's `..data`
/// swap is a symlink to a directory of regular files).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    /// `serve`'s files: a regular file only. A FIFO or a device there
    /// could hold the reloader for as long as it likes.
    RegularFile,
    /// The one-shot commands' files: a regular file or a pipe, so
    /// `--config <(kubectl get configmap … -o yaml)` works. A pipe is read
    /// blocking once opened, until its writer closes it; a FIFO with no
    /// writer yet reads nothing at once, which `check_pipe_delivered`
    /// makes an error rather than an empty input.
    RegularFileOrPipe,
}

/// Opens `path` for reading without blocking, and refuses anything but a
/// regular file (or a pipe, where `accept` allows one).
pub fn open(path: &Path, accept: Accept) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        // O_NOCTTY: a terminal at the path must not become ours.
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    if kind.is_fifo() && accept == Accept::RegularFileOrPipe {
        rustix::io::ioctl_fionbio(&file, false)?;
        return Ok(file);
    }
    let wanted = match accept {
        Accept::RegularFile => "a regular file",
        Accept::RegularFileOrPipe => "a regular file or a pipe",
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} where {wanted} is required", describe(kind)),
    ))
}

/// Refuses a pipe that delivered nothing: a named FIFO nobody had open
/// for writing when it was opened (a process substitution always has its
/// writer). `delivered` is how many bytes were read from it.
pub(crate) fn check_pipe_delivered(file: &File, delivered: usize) -> io::Result<()> {
    if delivered == 0 && file.metadata()?.file_type().is_fifo() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "a pipe that delivered nothing (a FIFO is read only while a writer has it open)",
        ));
    }
    Ok(())
}

fn describe(kind: FileType) -> &'static str {
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    fn mkfifo(path: &Path) {
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(made.success());
    }

    #[test]
    fn a_fifo_is_refused_at_once_for_serve_and_reads_as_empty_without_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("tls.crt");
        mkfifo(&fifo);
        let started = Instant::now();
        let err = open(&fifo, Accept::RegularFile).unwrap_err();
        assert_eq!(err.to_string(), "a FIFO where a regular file is required");
        // Through a symlink, as kubelet's projection has it.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        assert!(open(&link, Accept::RegularFile).is_err());
        let mut text = String::new();
        let mut file = open(&fifo, Accept::RegularFileOrPipe).unwrap();
        file.read_to_string(&mut text).unwrap();
        assert_eq!(text, "");
        let err = check_pipe_delivered(&file, 0).unwrap_err();
        assert!(err.to_string().starts_with("a pipe that delivered nothing"));
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn a_pipe_with_a_writer_is_read_to_its_end_by_the_one_shot_commands() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.yaml");
        mkfifo(&fifo);
        // The writer's end is opened first, as a shell's process
        // substitution has it (a reader held meanwhile lets it open).
        let keeper = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let mut w = OpenOptions::new().write(true).open(&fifo).unwrap();
        drop(keeper);
        let mut file = open(&fifo, Accept::RegularFileOrPipe).unwrap();
        let writer = std::thread::spawn(move || {
            // Later than the reader's first read, which must wait for it.
            std::thread::sleep(Duration::from_millis(200));
            w.write_all(b"kind: ConfigMap\n").unwrap();
        });
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        writer.join().unwrap();
        assert_eq!(text, "kind: ConfigMap\n");
    }

    #[test]
    fn directories_and_devices_are_refused_and_regular_files_read() {
        let dir = tempfile::tempdir().unwrap();
        let err = open(dir.path(), Accept::RegularFile).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a directory where a regular file is required"
        );
        let err = open(Path::new("/dev/null"), Accept::RegularFileOrPipe).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a character device where a regular file or a pipe is required"
        );
        let file = dir.path().join("tls.key");
        std::fs::write(&file, "key").unwrap();
        let mut text = String::new();
        open(&file, Accept::RegularFile)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "key");
    }
}
