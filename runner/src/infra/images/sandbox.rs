//! The sandbox for host-side work on a suite's inputs: building a kernel from source.
//!
//! A suite travels with a bug report and names config fragments and patches; a patch
//! can change any script or Makefile of the kernel tree, and `make` runs them. So every
//! command that runs code from the tree (applying the patches, the config steps,
//! `make bzImage`) runs under bubblewrap (`bwrap`, Debian package `bubblewrap`):
//!
//! - no network (`--unshare-all`: new network, IPC, PID, UTS and user namespaces);
//! - no capabilities (`--cap-drop ALL`), its own session (no `TIOCSTI` into our
//!   terminal), killed with its parent;
//! - a filesystem of the host's `/usr` (and `/bin`, `/lib*` as the host has them),
//!   `/etc/alternatives` (`cc`, `awk`), read-only; a fresh `/dev`, `/proc` and `/tmp`;
//!   no home, no `/root`, no other `/etc` file, no cache but the folders it is given;
//! - writable: only the folders given (the build's own folder and the compiler cache);
//! - an environment of `PATH`, `HOME=/tmp`, `LC_ALL=C` and what the command sets.
//!
//! Without `bwrap` a source kernel is not built (the error says what to install).

use std::path::Path;
use std::process::Command;

use super::ImageError;

/// The sandboxing program.
pub const BWRAP: &str = "bwrap";

/// Top-level folders of a merged-/usr or split system that programs under `/usr` may
/// need; each is recreated as the symbolic link or read-only folder the host has.
const SYSTEM_DIRS: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// `cmd` (program, arguments, environment it sets, working folder) wrapped to run in
/// the sandbox described in the module docs, with `writable` (absolute paths) the only
/// folders it can write.
///
/// Errors: [`ImageError::Kernel`] when `bwrap` is not installed, naming the package.
pub fn sandboxed(cmd: &Command, writable: &[&Path]) -> Result<Command, ImageError> {
    if !on_path(BWRAP) {
        return Err(ImageError::Kernel(
            "building a kernel from source runs its Makefiles and the suite's patches, which vmrepro only does in a sandbox: install bubblewrap (`bwrap`; Debian: apt-get install bubblewrap)".into(),
        ));
    }
    let mut b = Command::new(BWRAP);
    b.args(["--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL", "--clearenv"]);
    b.args(["--ro-bind", "/usr", "/usr"]);
    for dir in SYSTEM_DIRS {
        let p = Path::new(dir);
        match std::fs::read_link(p) {
            Ok(target) => {
                b.arg("--symlink").arg(target).arg(p);
            }
            Err(_) if p.is_dir() => {
                b.arg("--ro-bind").arg(p).arg(p);
            }
            Err(_) => {}
        }
    }
    b.args(["--ro-bind-try", "/etc/alternatives", "/etc/alternatives"]);
    b.args(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]);
    for w in writable {
        b.arg("--bind").arg(w).arg(w);
    }
    b.args(["--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"]);
    b.args(["--setenv", "HOME", "/tmp", "--setenv", "LC_ALL", "C"]);
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            b.arg("--setenv").arg(k).arg(v);
        }
    }
    if let Some(dir) = cmd.get_current_dir() {
        b.arg("--chdir").arg(dir);
    }
    b.arg("--").arg(cmd.get_program()).args(cmd.get_args());
    Ok(b)
}

/// Whether `program` is an executable file in a folder of `$PATH`.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(writable: &Path, script: &str) -> std::process::Output {
        let mut c = Command::new("sh");
        c.args(["-c", script]).current_dir(writable).env("VMREPRO_TEST", "set");
        sandboxed(&c, &[writable]).unwrap().output().unwrap()
    }

    #[test]
    fn the_sandbox_writes_only_its_folders_and_sees_no_host_secrets() {
        if !on_path(BWRAP) {
            // CI installs bubblewrap (.ci/install-deps); a developer machine may not.
            eprintln!("bwrap not installed: skipping");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = run(dir.path(), "echo made > inside && echo \"$VMREPRO_TEST\" && id -u");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(std::fs::read_to_string(dir.path().join("inside")).unwrap(), "made\n");
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("set\n"));

        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("escaped");
        let out = run(dir.path(), &format!("echo x > '{}'", target.display()));
        assert!(!out.status.success());
        assert!(!target.exists());

        // Host files outside /usr and /etc/alternatives are not there at all.
        for path in ["/etc/passwd", "/etc/shadow", "/root", "/home"] {
            let out = run(dir.path(), &format!("test -e {path}"));
            assert!(!out.status.success(), "{path} is visible in the sandbox");
        }
        // The host's environment is not passed in: only what the sandbox and the
        // command set (and what sh adds itself).
        let out = run(dir.path(), "env");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = line.split('=').next().unwrap_or_default();
            assert!(
                ["PATH", "HOME", "LC_ALL", "VMREPRO_TEST", "PWD", "OLDPWD", "SHLVL", "_"].contains(&name),
                "{line}"
            );
        }
        // No network: only a loopback device, and it is down.
        let out = run(dir.path(), "cat /proc/net/dev");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("lo:") && !text.lines().skip(2).any(|l| !l.trim_start().starts_with("lo:")), "{text}");
    }
}
