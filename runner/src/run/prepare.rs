//! Preparing one VM before QEMU starts: its folders, the qcow2 overlay over the shared
//! rootfs image, the initrd (rootfs part + the kernel's boot modules), the QEMU
//! configuration and command line, and the VM's initial record (every step `skipped`
//! until it runs).

use std::path::Path;

use crate::infra::images::{KernelArtifact, RootfsArtifact};
use crate::infra::net::mac_for;
use crate::infra::qemu::args::{kernel_cmdline, qemu_args, shell_line, Accelerator, QemuConfig};
use crate::plan::{Plan, VmPlan};

use super::record::{StepRecord, StepStatus, VmRecord};
use super::{io_err, RunError};

/// What [`prepare_vm`] made.
#[derive(Debug)]
pub(super) struct Prepared {
    /// QEMU's configuration.
    pub config: QemuConfig,
    /// The VM's record, before it boots.
    pub record: VmRecord,
}

/// Where and with what a VM is prepared.
#[derive(Debug)]
pub(super) struct Inputs<'a> {
    /// The run's plan.
    pub plan: &'a Plan,
    /// The run folder.
    pub run_dir: &'a Path,
    /// The run's private temp folder.
    pub tmp_dir: &'a Path,
    /// The VM's kernel.
    pub kernel: &'a KernelArtifact,
    /// The VM's root filesystem.
    pub rootfs: &'a RootfsArtifact,
    /// Its tap device.
    pub tap: &'a str,
    /// The accelerator it uses.
    pub accel: Accelerator,
}

/// Prepares VM `v`: writes `vms/<vm>/qemu-cmdline.txt` under the run folder and the
/// overlay and initrd under `<temp folder>/<vm>/` (a 0700 folder).
///
/// Errors: [`RunError::Io`] naming the file or tool (`qemu-img`) that failed.
pub(super) fn prepare_vm(v: &VmPlan, input: &Inputs<'_>) -> Result<Prepared, RunError> {
    let Inputs { plan, run_dir, tmp_dir, kernel, rootfs, tap, accel } = *input;
    let vdir = run_dir.join("vms").join(&v.name);
    std::fs::create_dir_all(&vdir).map_err(io_err("creating VM results folder", &vdir))?;
    let tdir = tmp_dir.join(&v.name);
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&tdir)
        .map_err(io_err("creating VM temp folder", &tdir))?;
    let overlay = tdir.join("root.qcow2");
    let out = std::process::Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2", "-F", "raw", "-b"])
        .arg(&rootfs.image)
        .arg(&overlay)
        .output()
        .map_err(io_err("running qemu-img for", &overlay))?;
    if !out.status.success() {
        return Err(RunError::Io {
            what: "creating overlay",
            path: overlay,
            source: std::io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        });
    }
    let initrd = tdir.join("initrd.cpio");
    crate::infra::images::initramfs::concat(&[&rootfs.initramfs_base, &kernel.initramfs_modules], &initrd)
        .map_err(io_err("writing initrd", &initrd))?;
    let cidr = format!("{}/{}", v.address, plan.subnet.prefix_len());
    let config = QemuConfig {
        name: v.name.clone(),
        memory_mib: v.memory_mib,
        cpus: v.cpus,
        accel,
        kernel: kernel.image.clone(),
        initrd,
        append: kernel_cmdline(&v.name, &cidr, plan.mtu, v.cmdline.as_deref()),
        root_overlay: overlay,
        modules_disk: kernel.modules_disk.clone(),
        tap: tap.to_string(),
        mac: mac_for(&plan.suite, &v.name),
        qmp_socket: tdir.join("qmp.sock"),
        qga_socket: tdir.join("qga.sock"),
        console_log: vdir.join("console.log"),
        shell_socket: tdir.join(crate::run::SHELL_SOCKET),
    };
    let cmdline = shell_line(&crate::infra::qemu::qemu_binary(), &qemu_args(&config));
    let cmd_path = vdir.join("qemu-cmdline.txt");
    std::fs::write(&cmd_path, format!("{cmdline}\n")).map_err(io_err("writing", &cmd_path))?;
    let record = VmRecord {
        name: v.name.clone(),
        kernel: v.kernel.label(),
        kernel_release: kernel.release.clone(),
        address: cidr,
        mac: config.mac.clone(),
        tap: config.tap.clone(),
        accel: config.accel,
        pid: None,
        boot_s: None,
        ending: None,
        console_log: format!("vms/{}/console.log", v.name),
        qemu_cmdline: format!("vms/{}/qemu-cmdline.txt", v.name),
        clock: None,
        steps: v
            .steps
            .iter()
            .map(|s| StepRecord {
                name: s.name.clone(),
                kind: s.kind.clone(),
                status: StepStatus::Skipped,
                exit_code: None,
                signal: None,
                expect_exit: s.expect_exit,
                duration_s: 0.0,
                started_s: None,
                stdout: None,
                stderr: None,
                error: None,
                diagnostics: None,
                snapshot: s.snapshot,
            })
            .collect(),
    };
    Ok(Prepared { config, record })
}
