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
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Outcome of the probe: the accelerator and, for a fallback, why.
#[derive(Debug, Clone)]
pub struct AccelChoice {
    /// What VMs will use.
    pub accel: Accelerator,
    /// Why KVM was not used (for the one-line notice), `None` if KVM is used.
    pub fallback_reason: Option<String>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Remembered {
    host: String,
    kvm: bool,
    reason: Option<String>,
}

/// Like [`probe`], but remembers the answer in `state_file` for as long as the host
/// stays up with the same QEMU (keyed by `/proc/sys/kernel/random/boot_id` and the
/// QEMU binary's size and mtime), so only the first run after a boot pays for it.
pub async fn probe_cached(kernel: &Path, state_file: &Path) -> AccelChoice {
    let host = host_identity();
    if let Some(r) = std::fs::read(state_file).ok().and_then(|b| serde_json::from_slice::<Remembered>(&b).ok()) {
        if r.host == host {
            return if r.kvm {
                AccelChoice { accel: Accelerator::Kvm, fallback_reason: None }
            } else {
                AccelChoice {
                    accel: Accelerator::Tcg,
                    fallback_reason: r.reason.map(|w| format!("{w}; remembered since this boot")),
                }
            };
        }
    }
    let c = probe(kernel).await;
    let r = Remembered { host, kvm: c.accel == Accelerator::Kvm, reason: c.fallback_reason.clone() };
    if let Some(dir) = state_file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let tmp = state_file.with_extension("tmp");
    if std::fs::write(&tmp, serde_json::to_vec(&r).unwrap_or_default()).is_ok() {
        let _ = std::fs::rename(&tmp, state_file);
    }
    c
}

fn host_identity() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let qemu = super::qemu_binary();
    let path = std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join(&qemu)).find(|c| c.is_file()))
        .unwrap_or_else(|| qemu.clone().into());
    let meta = std::fs::metadata(&path).ok();
    let mtime = meta
        .as_ref()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    format!("{} {} {} {}", boot.trim(), path.display(), meta.map_or(0, |m| m.len()), mtime)
}

/// Decides whether KVM really runs `kernel` on this host.
pub async fn probe(kernel: &Path) -> AccelChoice {
    let tcg = |why: String| AccelChoice { accel: Accelerator::Tcg, fallback_reason: Some(why) };
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        return tcg(match crate::infra::host::kvm_hint(&e) {
            Some(fix) => format!("/dev/kvm: {e}; to use KVM, {fix}"),
            None => format!("/dev/kvm: {e}"),
        });
    }
    let dir = match tempfile::Builder::new()
        .prefix("vmrepro-kvm-probe-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
    {
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
