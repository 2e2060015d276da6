//! Process plumbing shared by whatever the infrastructure forks (image tools, the
//! network holder, QEMU).

/// In a freshly forked child: asks for SIGKILL when the parent (`parent`, its PID before
/// the fork) dies, and fails if it already has (it may have died between the fork and
/// the `prctl`). Async-signal-safe: for `pre_exec` closures.
pub(crate) fn die_with_parent(parent: u32) -> std::io::Result<()> {
    // SAFETY: plain system calls.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::getppid() as u32 != parent {
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    Ok(())
}
