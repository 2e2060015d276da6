//! Writing initramfs archives (cpio "newc", as the kernel's `initramfs` unpacker reads).
//!
//! A VM's initrd is two archives concatenated (the kernel unpacks them in order):
//! the rootfs's base part (busybox, `/init`, `/dev/console`) and the kernel's part
//! (the virtio modules needed to reach the root disk, and `/boot-modules`, the order to
//! load them in).

use std::io::Write;
use std::path::Path;

/// One member of an archive.
#[derive(Debug, Clone)]
pub enum Member {
    /// A directory (mode 0755).
    Dir {
        /// Path inside the archive, without a leading `/`.
        name: String,
    },
    /// A regular file.
    File {
        /// Path inside the archive.
        name: String,
        /// Permission bits (e.g. `0o755`).
        mode: u32,
        /// Contents.
        data: Vec<u8>,
    },
    /// A character device node.
    CharDev {
        /// Path inside the archive.
        name: String,
        /// Device major number.
        major: u32,
        /// Device minor number.
        minor: u32,
    },
}

/// Writes `members` as one newc archive to `out`.
pub fn write_archive(out: &Path, members: &[Member]) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::new(std::fs::File::create(out)?);
    for (i, m) in members.iter().enumerate() {
        let ino = i as u32 + 1;
        let (name, mode, data, rdev): (&str, u32, &[u8], (u32, u32)) = match m {
            Member::Dir { name } => (name, 0o040755, &[], (0, 0)),
            Member::File { name, mode, data } => (name, 0o100000 | mode, data, (0, 0)),
            Member::CharDev { name, major, minor } => (name, 0o020600, &[], (*major, *minor)),
        };
        let size =
            u32::try_from(data.len()).map_err(|_| std::io::Error::other("initramfs member larger than 4 GiB"))?;
        let mut writer = cpio::newc::Builder::new(name)
            .ino(ino)
            .mode(mode)
            .nlink(if matches!(m, Member::Dir { .. }) { 2 } else { 1 })
            .rdev_major(rdev.0)
            .rdev_minor(rdev.1)
            .write(&mut w, size);
        writer.write_all(data)?;
        writer.finish()?;
    }
    cpio::newc::trailer(&mut w)?;
    w.flush()
}

/// Concatenates archives into one initrd file.
pub fn concat(parts: &[&Path], out: &Path) -> std::io::Result<()> {
    let mut w = std::fs::File::create(out)?;
    for p in parts {
        let mut r = std::fs::File::open(p)?;
        std::io::copy(&mut r, &mut w)?;
    }
    w.flush()
}
