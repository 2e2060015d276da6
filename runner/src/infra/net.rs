//! The suite's private network: a network namespace (inside a user namespace when not
//! root) holding one Linux bridge and one tap device per VM NIC.
//!
//! The namespace is kept alive by a *holder* process (`cat` reading a pipe from us, in
//! its own process group so that a Ctrl-C on the terminal doesn't end it before the
//! VMs are down): when the runner exits for any reason the pipe closes (and
//! `PR_SET_PDEATHSIG` kills it), the holder exits, and the namespace with its bridge and
//! taps disappears once the last QEMU in it has gone (QEMU too gets `PR_SET_PDEATHSIG`,
//! see [`Namespace::enter`]). QEMU and `ip` are started inside it with `setns(2)`
//! from a `pre_exec` hook, so nothing is passed through a shell. The bridge has no
//! uplink and no address: guests reach each other and nothing else.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};

use nix::sched::CloneFlags;

/// Errors while creating the namespace or its devices.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The holder process couldn't be started (user namespaces disabled?).
    #[error("cannot create the private network namespace: {0}")]
    Namespace(std::io::Error),
    /// A prerequisite of rootless networking is missing (user namespaces turned off,
    /// `/dev/net/tun` not accessible); the message says how to fix it.
    #[error(transparent)]
    Host(#[from] crate::infra::host::Missing),
    /// An `ip` command failed.
    #[error("`ip {args}` failed in the suite's namespace: {output}")]
    Ip {
        /// Arguments.
        args: String,
        /// Its stderr.
        output: String,
    },
}

/// A private network namespace; dropping it ends the holder process.
#[derive(Debug)]
pub struct Namespace {
    holder: Child,
    userns: Option<OwnedFd>,
    netns: OwnedFd,
}

impl Namespace {
    /// Creates a new network namespace (and a user namespace mapping our uid to root
    /// when we are not root).
    pub fn create() -> Result<Self, NetError> {
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        let rootless = uid != 0;
        // Everything the child needs is prepared before fork: no allocation after it.
        let uid_map = CString::new(format!("0 {uid} 1")).expect("no NUL");
        let gid_map = CString::new(format!("0 {gid} 1")).expect("no NUL");
        let parent = std::process::id();
        let mut cmd = Command::new("cat");
        cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        // SAFETY: the closure only makes async-signal-safe system calls.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(move || {
                crate::infra::process::die_with_parent(parent)?;
                let flags = if rootless {
                    CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET
                } else {
                    CloneFlags::CLONE_NEWNET
                };
                nix::sched::unshare(flags).map_err(std::io::Error::from)?;
                if rootless {
                    write_proc(c"/proc/self/setgroups", b"deny")?;
                    write_proc(c"/proc/self/uid_map", uid_map.as_bytes())?;
                    write_proc(c"/proc/self/gid_map", gid_map.as_bytes())?;
                }
                Ok(())
            });
        }
        let holder = cmd.spawn().map_err(|e| {
            if rootless {
                NetError::Host(crate::infra::host::userns_error(&e))
            } else {
                NetError::Namespace(e)
            }
        })?;
        let pid = holder.id();
        let open = |kind: &str| {
            std::fs::File::open(format!("/proc/{pid}/ns/{kind}")).map(OwnedFd::from).map_err(NetError::Namespace)
        };
        let netns = open("net")?;
        let userns = if rootless { Some(open("user")?) } else { None };
        let ns = Namespace { holder, userns, netns };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// PID of the holder process.
    pub fn holder_pid(&self) -> u32 {
        self.holder.id()
    }

    /// The namespace's inode number (what `/proc/<pid>/ns/net` of every process in it
    /// shows as `net:[<inode>]`); 0 if it can't be read.
    pub fn inode(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        self.netns.try_clone().map(std::fs::File::from).and_then(|f| f.metadata()).map_or(0, |m| m.ino())
    }

    /// Makes `cmd` start inside this namespace and die with the runner (SIGKILL when the
    /// thread that spawned it ends; the runner's thread lives as long as the run).
    pub fn enter(&self, cmd: &mut Command) {
        let userns = self.userns.as_ref().map(|f| f.as_raw_fd());
        let netns = self.netns.as_raw_fd();
        let parent = std::process::id();
        // SAFETY: the closure only makes async-signal-safe system calls.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(move || {
                crate::infra::process::die_with_parent(parent)?;
                if let Some(u) = userns {
                    if libc::setns(u, libc::CLONE_NEWUSER) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if libc::setns(netns, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Runs `ip ARGS` in the namespace.
    pub fn ip(&self, args: &[&str]) -> Result<(), NetError> {
        let mut cmd = Command::new("ip");
        cmd.args(args).stdin(Stdio::null());
        self.enter(&mut cmd);
        let out = cmd.output().map_err(|e| NetError::Ip { args: args.join(" "), output: e.to_string() })?;
        if !out.status.success() {
            return Err(NetError::Ip {
                args: args.join(" "),
                output: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(())
    }

    /// Creates bridge `bridge` with MTU `mtu` and the tap devices `taps`, attached to it
    /// and up.
    pub fn create_bridge(&self, bridge: &str, mtu: u32, taps: &[String]) -> Result<(), NetError> {
        let mtu = mtu.to_string();
        if !taps.is_empty() {
            // Inside our user namespace, opening the tun device is still checked against
            // the host's permissions: say how to get them rather than failing in `ip`.
            crate::infra::host::check_tun()?;
        }
        self.ip(&["link", "add", bridge, "type", "bridge", "stp_state", "0"])?;
        self.ip(&["link", "set", bridge, "mtu", &mtu, "up"])?;
        for tap in taps {
            self.ip(&["tuntap", "add", "dev", tap, "mode", "tap"]).map_err(|e| match e {
                NetError::Ip { args, output } if output.contains("Permission denied") => NetError::Ip {
                    args,
                    output: format!("{output} — /dev/net/tun is not usable by this user (Debian's default mode is 0666; here it is not)"),
                },
                e => e,
            })?;
            self.ip(&["link", "set", tap, "mtu", &mtu, "master", bridge, "up"])?;
        }
        Ok(())
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // Closing cat's stdin ends it; kill in case it is stuck.
        drop(self.holder.stdin.take());
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> std::io::Result<()> {
    // SAFETY: plain system calls on a valid C string and buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A locally administered unicast MAC derived from the suite and VM names
/// (`52:54:00` is QEMU's prefix; the rest is a hash, stable across runs).
pub fn mac_for(suite: &str, vm: &str) -> String {
    let h = crate::infra::hash::sha256_hex(format!("{suite}/{vm}").as_bytes());
    format!("52:54:00:{}:{}:{}", &h[0..2], &h[2..4], &h[4..6])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_are_stable_and_distinct() {
        assert_eq!(mac_for("s", "a"), mac_for("s", "a"));
        assert_ne!(mac_for("s", "a"), mac_for("s", "b"));
        assert!(mac_for("s", "a").starts_with("52:54:00:"));
    }

    #[test]
    fn bridge_and_taps_live_only_in_the_namespace() {
        let ns = match Namespace::create() {
            Ok(ns) => ns,
            Err(e) => panic!("namespaces must work on this machine: {e}"),
        };
        ns.create_bridge("vmrbr0", 1500, &["vmrtap0".into()]).unwrap();
        // The host's namespace doesn't see them.
        let host = std::process::Command::new("ip").args(["link", "show", "vmrtap0"]).output().unwrap();
        assert!(!host.status.success());
        let pid = ns.holder_pid();
        drop(ns);
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z"))
        );
    }
}
