//! Choosing between KVM and TCG.
//!
//! `/dev/kvm` existing is not enough: on some hosts (e.g. PVM hosts) it opens and
//! answers `KVM_GET_API_VERSION` but a guest hangs or fails on MSRs. So `auto` boots
//! the suite's own kernel under KVM with no root device and `panic=-1 -no-reboot`: a
//! working KVM panics and exits in about a second; anything else (error, hang past
//! [`PROBE_TIMEOUT`]) means TCG.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::args::Accelerator;

/// How long the KVM probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// Outcome of the probe: the accelerator and, for a fallback, why.
#[derive(Debug, Clone)]
pub struct AccelChoice {
    /// What VMs will use.
    pub accel: Accelerator,
    /// Why KVM was not used (for the one-line notice), `None` if KVM is used.
    pub fallback_reason: Option<String>,
}

/// Decides whether KVM really runs `kernel` on this host.
pub async fn probe(kernel: &Path) -> AccelChoice {
    let tcg = |why: String| AccelChoice { accel: Accelerator::Tcg, fallback_reason: Some(why) };
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        return tcg(format!("/dev/kvm: {e}"));
    }
    let dir = match tempfile::Builder::new().prefix("vmrepro-kvm-probe-").tempdir() {
        Ok(d) => d,
        Err(e) => return tcg(format!("cannot create probe folder: {e}")),
    };
    let console = dir.path().join("console.log");
    let mut cmd = tokio::process::Command::new(super::qemu_binary());
    cmd.args([
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-machine",
        "q35",
        "-accel",
        "kvm",
        "-cpu",
        "host",
        "-m",
        "256",
    ])
    .arg("-kernel")
    .arg(kernel)
    .args(["-append", "console=ttyS0 panic=-1 root=/dev/vmrepro-no-root"])
    .arg("-serial")
    .arg(format!("file:{}", console.display()))
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return tcg(format!("cannot start QEMU: {e}")),
    };
    match tokio::time::timeout(PROBE_TIMEOUT, child.wait_with_output()).await {
        Err(_) => tcg(format!("a test guest did not finish booting under KVM within {}s", PROBE_TIMEOUT.as_secs())),
        Ok(Err(e)) => tcg(format!("QEMU: {e}")),
        Ok(Ok(out)) => {
            let log = std::fs::read_to_string(&console).unwrap_or_default();
            if log.contains("Kernel panic") || log.contains("VFS:") {
                AccelChoice { accel: Accelerator::Kvm, fallback_reason: None }
            } else {
                let err = String::from_utf8_lossy(&out.stderr);
                let first =
                    err.lines().find(|l| !l.trim().is_empty()).unwrap_or("the test guest printed nothing").trim();
                tcg(format!("KVM did not run a test guest ({first})"))
            }
        }
    }
}
